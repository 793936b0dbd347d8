; Complements tree_sitter_javascript/queries/tags.scm, which skips constructors and
; private (#name) methods and knows nothing of class fields holding functions.

(method_definition
  name: [(property_identifier) (private_property_identifier)] @name) @definition.method

(field_definition
  property: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @definition.method
