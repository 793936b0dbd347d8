; Replaces tree_sitter_c/queries/tags.scm, whose function pattern captures the declarator
; (`foo(int x)`) rather than the definition with its body. Function names are read from the
; declarator chain in code (pointers, parentheses), so no @name here.

(function_definition) @definition.function

; prototypes: `int foo(int);`, `char *foo(void);`
(declaration
  declarator: (function_declarator)) @definition.function
(declaration
  declarator: (pointer_declarator
    declarator: [(function_declarator) (pointer_declarator declarator: (function_declarator))])) @definition.function

(preproc_function_def
  name: (identifier) @name) @definition.function

(struct_specifier
  name: (type_identifier) @name
  body: (field_declaration_list)) @definition.struct

(union_specifier
  name: (type_identifier) @name
  body: (field_declaration_list)) @definition.struct

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list)) @definition.enum

(type_definition
  declarator: (type_identifier) @name) @definition.type
