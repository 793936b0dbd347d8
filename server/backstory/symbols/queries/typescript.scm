; Used for both TypeScript and TSX, on top of the JavaScript and TypeScript tags.scm.

(method_definition
  name: [(property_identifier) (private_property_identifier)] @name) @definition.method

(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @definition.method

(enum_declaration
  name: (identifier) @name) @definition.enum

(type_alias_declaration
  name: (type_identifier) @name) @definition.type

; `namespace A.B { }` (tags.scm only knows the `module X { }` spelling)
(internal_module
  name: [(identifier) (nested_identifier)] @name) @definition.module

; `declare module "pkg" { }`
(module
  name: (string (string_fragment) @name)) @definition.module
