; Complements tree_sitter_ruby/queries/tags.scm (methods, classes, modules).

(assignment
  left: (constant) @name) @definition.constant
