; Complements tree_sitter_go/queries/tags.scm (functions, methods, type specs).
; The receiver type of methods is read in code; struct/interface kinds too.

(type_alias
  name: (type_identifier) @name) @definition.type

(const_spec
  name: (identifier) @name) @definition.constant

(method_elem
  name: (field_identifier) @name) @definition.method
