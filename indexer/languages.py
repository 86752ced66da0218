"""Language registry: which files are parsed with which grammar and tags query.

The grammars come bundled with tree-sitter-language-pack 0.13, or, where a maintained
per-language grammar wheel parses more real code (Kotlin, Swift, Scala: docs/languages.md),
from that wheel; both ship compiled grammars (never downloaded at run time). The tags
queries are our own, one ``queries/<language>.scm`` per language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

QUERY_DIR = Path(__file__).parent / "queries"


@dataclass(frozen=True)
class LanguageSpec:
    """How one language is parsed and how its definitions nest."""

    name: str
    grammar: str  # the grammar's name in tree-sitter-language-pack 0.13
    extensions: tuple[str, ...]
    # Node types that wrap a definition and are syntactically part of it (a Python
    # decorated_definition): the fragment grows to the wrapper.
    wrappers: tuple[str, ...] = ()
    # Symbol kinds whose directly nested functions are methods (a function in a
    # namespace or module stays a function, except in Ruby where modules hold methods).
    class_kinds: frozenset[str] = field(
        default_factory=lambda: frozenset(
            {"class", "struct", "interface", "trait", "enum", "object", "impl", "protocol",
             "extension", "record"}
        )
    )
    # @qualifier nests under the enclosing scope instead of replacing it, written scopes
    # normalised (`ns::Foo<T>::` -> `ns.Foo`): C++ out-of-line members keep their namespace.
    qualifier_nests: bool = False
    # Statement-form scopes (`@definition.<kind>.rest`: C# `namespace X;`, PHP `namespace X;`,
    # Scala `package x`) qualify what follows them up to the end of their parent; a later
    # one ends an earlier one (PHP), unless they chain (Scala: `package a` + `package b` is a.b).
    statement_scopes_chain: bool = False
    # The keyword of those statements: damage that holds it may have swallowed one, and
    # with it the qualification of everything after it (indexer/damage.py).
    statement_scope_keyword: str | None = None
    # A maintained per-language grammar wheel that parses more real code than the bundled
    # grammar (docs/languages.md): "module:function" returning the language pointer.
    wheel: str | None = None


_SPECS: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", "python", (".py", ".pyi"), wrappers=("decorated_definition",)),
    LanguageSpec("typescript", "typescript", (".ts", ".mts", ".cts")),
    LanguageSpec("tsx", "tsx", (".tsx",)),
    LanguageSpec("javascript", "javascript", (".js", ".mjs", ".cjs", ".jsx")),
    LanguageSpec("go", "go", (".go",)),
    LanguageSpec("rust", "rust", (".rs",)),
    LanguageSpec("java", "java", (".java",)),
    LanguageSpec("c", "c", (".c", ".h")),
    LanguageSpec("cpp", "cpp", (".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++"),
                 qualifier_nests=True),
    LanguageSpec("csharp", "csharp", (".cs",), statement_scope_keyword="namespace"),
    LanguageSpec("ruby", "ruby", (".rb", ".rake", ".gemspec"),
                 class_kinds=frozenset({"class", "module"})),
    LanguageSpec("kotlin", "kotlin", (".kt", ".kts"), wheel="tree_sitter_kotlin:language"),
    LanguageSpec("php", "php", (".php",), statement_scope_keyword="namespace"),
    LanguageSpec("swift", "swift", (".swift",), wheel="tree_sitter_swift:language"),
    LanguageSpec("scala", "scala", (".scala", ".sc"), wheel="tree_sitter_scala:language",
                 statement_scopes_chain=True, statement_scope_keyword="package"),
)

LANGUAGES: dict[str, LanguageSpec] = {s.name: s for s in _SPECS}
_BY_EXT: dict[str, str] = {ext: s.name for s in _SPECS for ext in s.extensions}


def language_for_path(path: str) -> str | None:
    """The language a repository path is parsed as, or None (inventoried only)."""
    # PurePosixPath(path).suffix, without building a path object (called once per file of
    # every inventory: at 250k files pathlib alone cost seconds).
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return _BY_EXT.get(name[dot:].lower()) if 0 < dot < len(name) - 1 else None


@cache
def query_source(language: str) -> str:
    """The tags query of ``language``. A line ``; inherits: other`` puts ``other``'s whole
    query first (TSX = TypeScript + JSX), so shared patterns are written once."""
    text = (QUERY_DIR / f"{language}.scm").read_text(encoding="utf-8")
    parents = [line.split(":", 1)[1].strip() for line in text.splitlines()
               if line.startswith("; inherits:")]
    return "".join(query_source(parent) + "\n" for parent in parents) + text
