; JavaScript (and JSX) tags: classes, functions, methods (class members, arrow-function
; class fields), module-level `const` declarators, imports (ES `import`, re-exports,
; dynamic `import()`, `require()`), calls (`new` and capitalised JSX elements included)
; and `extends` clauses.
;
; Order matters where two patterns can match the same node: the extractor keeps the first
; match per node, and tree-sitter reports matches that end on the same node in pattern
; order, so the function-valued `const` patterns precede the generic constant ones.

; --- classes, functions, methods ------------------------------------------------------

(class_declaration
  name: (identifier) @name) @definition.class

(function_declaration
  name: (identifier) @name) @definition.function

(generator_function_declaration
  name: (identifier) @name) @definition.function

(class_body
  (method_definition
    name: [(property_identifier) (private_property_identifier)] @name) @definition.function)

(class_body
  (field_definition
    property: [(property_identifier) (private_property_identifier)] @name
    value: [(arrow_function) (function_expression)]) @definition.function)

; A class expression assigned to a (static) field is a nested class.
(class_body
  (field_definition
    property: [(property_identifier) (private_property_identifier)] @name
    value: (class)) @definition.class)

; --- module-level const ----------------------------------------------------------------
; `const f = () => ...` / `const f = function ...` is a function, `const C = class ...` a
; class; any other initialised top-level `const` is a constant, except a CommonJS
; `require(...)` binding (an import, not a symbol). `let`/`var` are not symbols.

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)]) @definition.function))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: [(arrow_function) (function_expression) (generator_function)]) @definition.function))

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (class)) @definition.class))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (class)) @definition.class))

(program
  (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (_) @_value) @definition.constant
    (#not-match? @_value "^require[ ]*[(]")))

(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator
      name: (identifier) @name
      value: (_) @_value) @definition.constant
    (#not-match? @_value "^require[ ]*[(]")))

; --- imports ----------------------------------------------------------------------------

(import_statement
  source: (string (string_fragment) @name)) @reference.import

(export_statement
  source: (string (string_fragment) @name)) @reference.import

(call_expression
  function: (import)
  arguments: (arguments . (string (string_fragment) @name))) @reference.import

(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @name))
  (#eq? @_require "require")) @reference.import

; --- calls ------------------------------------------------------------------------------

(call_expression
  function: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.call

(new_expression
  constructor: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]) @reference.call

(jsx_opening_element
  name: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]
  (#match? @name "^[A-Z]")) @reference.call

(jsx_self_closing_element
  name: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]
  (#match? @name "^[A-Z]")) @reference.call

; --- inheritance ------------------------------------------------------------------------

(class_heritage
  [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ] @reference.inherit)
