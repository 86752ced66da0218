; Python tags: classes, functions (methods when nested in a class), module constants,
; imports, calls and base classes.

(class_definition
  name: (identifier) @name) @definition.class

(function_definition
  name: (identifier) @name) @definition.function

(module
  (assignment
    left: (identifier) @name) @definition.constant)

(module
  (expression_statement
    (assignment
      left: (identifier) @name) @definition.constant))

(import_statement
  name: (dotted_name) @name) @reference.import

(import_statement
  name: (aliased_import name: (dotted_name) @name)) @reference.import

(import_from_statement
  module_name: (dotted_name) @name) @reference.import

(import_from_statement
  module_name: (relative_import) @name) @reference.import

(call
  function: [
    (identifier) @name
    (attribute attribute: (identifier) @name)
  ]) @reference.call

(class_definition
  superclasses: (argument_list
    [
      (identifier) @name
      (attribute attribute: (identifier) @name)
    ] @reference.inherit))
