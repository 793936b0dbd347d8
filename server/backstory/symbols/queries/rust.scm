; Complements tree_sitter_rust/queries/tags.scm: impl blocks are what qualifies methods
; ("Type::method"), trait method signatures and constants are definitions too.

(impl_item
  type: (_) @name) @definition.impl

(function_signature_item
  name: (identifier) @name) @definition.function

(const_item
  name: (identifier) @name) @definition.constant

(static_item
  name: (identifier) @name) @definition.constant
