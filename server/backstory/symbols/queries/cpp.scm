; Replaces tree_sitter_cpp/queries/tags.scm (see c.scm for why). Function names, including
; `Class::method` out-of-line definitions, destructors and operators, are read in code.

(function_definition) @definition.function

; prototypes: `int foo(int);`, `char *foo();`, `Foo& get();`
(declaration
  declarator: (function_declarator)) @definition.function
(declaration
  declarator: [
    (pointer_declarator
      declarator: [(function_declarator) (pointer_declarator declarator: (function_declarator))])
    (reference_declarator (function_declarator))]) @definition.function

; member function declarations inside a class body
(field_declaration
  declarator: (function_declarator)) @definition.function
(field_declaration
  declarator: [
    (pointer_declarator
      declarator: [(function_declarator) (pointer_declarator declarator: (function_declarator))])
    (reference_declarator (function_declarator))]) @definition.function

(preproc_function_def
  name: (identifier) @name) @definition.function

(class_specifier
  name: (_) @name
  body: (field_declaration_list)) @definition.class

(struct_specifier
  name: (_) @name
  body: (field_declaration_list)) @definition.struct

(union_specifier
  name: (_) @name
  body: (field_declaration_list)) @definition.struct

(enum_specifier
  name: (_) @name
  body: (enumerator_list)) @definition.enum

(namespace_definition
  name: (_) @name) @definition.module

(type_definition
  declarator: (type_identifier) @name) @definition.type

(alias_declaration
  name: (type_identifier) @name) @definition.type
