; TSX tags: the TypeScript tags (inherited below: typescript.scm is read first, so its
; patterns keep their order and precedence) plus JSX component references: rendering a
; capitalised element is a call.
; inherits: typescript

; --- JSX: rendering a component (capitalised element name) is a call -----------------

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
