; Ruby tags: modules, classes, methods (`def x`, `def self.x`, methods inside
; `class << self`), constants assigned in a file/class/module body, `require` /
; `require_relative` / `load` as imports, calls, and superclasses plus
; `include` / `extend` / `prepend` mixins as inheritance.
;
; - `class A::B` is qualified by its written scope: `A.B` (@qualifier replaces the
;   nesting prefix; a deeper scope `A::B::C` keeps its `::` in the qualifier).
; - Instance and singleton methods both get kind `method` and `.` as separator.

; --- modules and classes ------------------------------------------------------------------

(module
  name: (constant) @name) @definition.module

(module
  name: (scope_resolution
    scope: (_) @qualifier
    name: (constant) @name)) @definition.module

(class
  name: (constant) @name) @definition.class

(class
  name: (scope_resolution
    scope: (_) @qualifier
    name: (constant) @name)) @definition.class

; --- methods --------------------------------------------------------------------------------

(method
  name: (_) @name) @definition.function

(singleton_method
  name: (_) @name) @definition.function

; --- constants ------------------------------------------------------------------------------

(program
  (assignment
    left: (constant) @name) @definition.constant)

(class
  body: (body_statement
    (assignment
      left: (constant) @name) @definition.constant))

(module
  body: (body_statement
    (assignment
      left: (constant) @name) @definition.constant))

; --- imports --------------------------------------------------------------------------------

(call
  !receiver
  method: (identifier) @_require
  arguments: (argument_list (string (string_content) @name))
  (#any-of? @_require "require" "require_relative" "load" "autoload")) @reference.import

; --- calls ----------------------------------------------------------------------------------

(call
  method: (identifier) @name) @reference.call

; --- inheritance: superclass and mixins ---------------------------------------------------------

(superclass
  [
    (constant) @name
    (scope_resolution name: (constant) @name)
  ]) @reference.inherit

(call
  !receiver
  method: (identifier) @_mixin
  arguments: (argument_list
    [
      (constant) @name
      (scope_resolution name: (constant) @name)
    ])
  (#any-of? @_mixin "include" "extend" "prepend")) @reference.inherit
