"""Does one ES|QL ``RERANK`` command read the way a release build of Elasticsearch reads it?

A small hand-written scanner and recursive-descent reader for ``tests/elastic/test_esql_rerank.py``.
Nothing below is taken from Elasticsearch: each function states, in its docstring and in our own words,
the fact it checks and the file of elastic/elasticsearch (Elastic License 2.0) and the commit that fact
was read from. In short, a release build takes

    RERANK [<column> =] <query> ON <field>[, <field> ...] [WITH { "<key>": <constant>, ... }]

where ``<query>`` is a constant (the checks after parsing, in the test module, narrow it to a string or a
single ``?`` parameter), ``<field>`` is ``[<column> =] <column>`` and every keyword is case-insensitive.

Where this checker takes less than Elasticsearch: a field's value may be any boolean expression there;
here it must be a column name, which is all the docs use. Anything outside the pieces below (operators,
parentheses, a ``|``) is refused at once, where Elasticsearch would lex it and then fail to parse it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class EsqlError(ValueError):
    """A RERANK command Elasticsearch would refuse (at lexing, parsing or analysis), and why."""


# -- the pieces of text -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    kind: str  # string, integer, decimal, name, quoted_name, keyword, param, double_param, or the character
    text: str  # as written
    start: int
    end: int


# Words that, in the mode the lexer is in after RERANK, are keywords rather than names: unquoted they can
# never be a column. The reader itself uses on, with, null, true and false.
KEYWORDS = frozenset({
    "and", "asc", "by", "desc", "false", "first", "in", "is", "last", "like", "not", "null", "nulls", "on",
    "or", "rlike", "true", "where", "with",
})
# Single characters the reader has a use for; any other character is refused.
PUNCTUATION = frozenset("=,.:{}[]+-")

_DIGITS = "0123456789"
_NAME_BODY = r"[A-Za-z0-9_]"
_WORD = re.compile(rf"[A-Za-z]{_NAME_BODY}*|[_@]{_NAME_BODY}+")
_DECIMAL = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_INTEGER = re.compile(r"[0-9]+")
_TRIPLE = re.compile(r'"""[^\r\n]*?"""(?:""?)?')
_QUOTED = re.compile(r'"(?:\\[tnr"\\]|[^\r\n"\\])*"')
_BACKQUOTED = re.compile(r"`(?:``|[^`])+`")
_PARAM = re.compile(r"\?\??(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)?")
_SPACE = re.compile(r"[ \t\r\n]+")
_LINE_COMMENT = re.compile(r"//[^\r\n]*\r?\n?")


def skip_hidden(text: str, pos: int) -> int:
    """Where the next token starts: blanks and comments carry no meaning and are passed over.

    Blanks are spaces, tabs, carriage returns and line feeds (no other white space). A line comment runs
    from ``//`` to the end of its line; a block comment from ``/*`` to its ``*/`` and may hold further
    block comments, each closed in turn.

    Read from ``x-pack/plugin/esql/src/main/antlr/EsqlBaseLexer.g4`` @
    d554ad564669530da10ceee6d199afecb7da23d5 (where the comment and blank rules are defined, sent to the
    hidden channel) and ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @
    676c3e985a541a68db6676787a5088734eb6b47e (which reuses them in the mode after RERANK).
    """
    while True:
        match = _SPACE.match(text, pos) or _LINE_COMMENT.match(text, pos)
        if match:
            pos = match.end()
        elif text.startswith("/*", pos):
            pos = _block_comment_end(text, pos)
        else:
            return pos


def _block_comment_end(text: str, pos: int) -> int:
    depth, pos = 1, pos + 2
    while depth:
        if pos >= len(text):
            raise EsqlError("a /* comment that is never closed")
        if text.startswith("/*", pos):
            depth, pos = depth + 1, pos + 2
        elif text.startswith("*/", pos):
            depth, pos = depth - 1, pos + 2
        else:
            pos += 1
    return pos


def scan_string(text: str, pos: int) -> Token | None:
    """A string literal, in one of two forms.

    - Between single double quotes, on one line: a backslash may only start ``\\t``, ``\\n``, ``\\r``,
      ``\\"`` or ``\\\\``; any other character but a double quote, a backslash or a line break stands for
      itself.
    - Between triple double quotes, on one line, with no escapes: it ends at the first ``\"\"\"`` after the
      opening one, and up to two more double quotes right after that belong to it (so a string can end in
      a double quote).

    When both forms would match, the longer text wins (``\"\"\"a\"\"\"`` is the triple form, ``\"\"`` alone
    the empty string). Read from ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @
    676c3e985a541a68db6676787a5088734eb6b47e.
    """
    match = _TRIPLE.match(text, pos) or _QUOTED.match(text, pos)
    return Token("string", match.group(), pos, match.end()) if match else None


def scan_number(text: str, pos: int) -> Token | None:
    """An unsigned number: digits alone are an integer; digits with a decimal point (and digits on at
    least one side of it), or with an exponent ``e``/``E`` and an optionally signed power, are a decimal.
    Signs are separate ``+``/``-`` characters that the reader puts in front.

    Read from ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @
    676c3e985a541a68db6676787a5088734eb6b47e (the longest match wins, so ``1.5`` is one decimal, and
    ``.5`` a decimal rather than a dot).
    """
    match = _DECIMAL.match(text, pos)
    if match:
        return Token("decimal", match.group(), pos, match.end())
    match = _INTEGER.match(text, pos)
    return Token("integer", match.group(), pos, match.end()) if match else None


def scan_word(text: str, pos: int) -> Token | None:
    """A bare word: a letter then letters, digits and underscores; or one ``_`` or ``@`` then at least one
    letter, digit or underscore (``_`` or ``@`` alone is no name). Letters are ASCII, in either case.

    A word that is one of ``KEYWORDS`` (compared case-insensitively) is that keyword, never a name: the
    lexer prefers the keyword when both match the same text, while a longer word (``online``) is a name.
    Read from ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @
    676c3e985a541a68db6676787a5088734eb6b47e (the keywords of the expression mode, ``where`` among them),
    and ``x-pack/plugin/esql/src/main/antlr/EsqlBaseLexer.g4`` @ d554ad564669530da10ceee6d199afecb7da23d5
    (the whole lexer ignores case).
    """
    match = _WORD.match(text, pos)
    if match is None:
        return None
    kind = "keyword" if match.group().lower() in KEYWORDS else "name"
    return Token(kind, match.group(), pos, match.end())


def scan_backquoted(text: str, pos: int) -> Token | None:
    """A name between backquotes: at least one character, where a doubled backquote stands for one
    backquote. It is always a name, keyword or not. Read from
    ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @ 676c3e985a541a68db6676787a5088734eb6b47e.
    """
    match = _BACKQUOTED.match(text, pos)
    return Token("quoted_name", match.group(), pos, match.end()) if match else None


def scan_parameter(text: str, pos: int) -> Token | None:
    """A query parameter: ``?`` alone (the next positional one), ``?`` then a name (a letter or ``_``, then
    letters, digits, underscores) or ``?`` then digits (a position). The same three with ``??`` are
    *double* parameters, which may stand for a name but never for a value. Read from
    ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @ 676c3e985a541a68db6676787a5088734eb6b47e.
    """
    match = _PARAM.match(text, pos)
    if match is None:
        return None
    kind = "double_param" if match.group().startswith("??") else "param"
    return Token(kind, match.group(), pos, match.end())


def tokens(command: str) -> list[Token]:
    """The tokens of one RERANK command: the command word, then those of the mode it switches the lexer to.

    The command word is ``rerank`` in any case, a release keyword: the token list at the same commit
    names it without the ``DEV_`` prefix that marks tokens only snapshot builds know. Read from
    ``x-pack/plugin/esql/src/main/antlr/lexer/Expression.g4`` @ 676c3e985a541a68db6676787a5088734eb6b47e
    (the keyword, which switches to the expression mode, behind no development-only condition) and
    ``x-pack/plugin/esql/src/main/antlr/EsqlBaseLexer.tokens`` @ d554ad564669530da10ceee6d199afecb7da23d5.
    """
    pos = skip_hidden(command, 0)
    head = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(command, pos)
    if head is None or head.group().lower() != "rerank":
        raise EsqlError(f"a RERANK command starts with RERANK, not {command[pos:pos + 20]!r}")
    out = [Token("keyword", head.group(), pos, head.end())]
    pos = skip_hidden(command, head.end())
    while pos < len(command):
        char = command[pos]
        if char == '"':
            token = scan_string(command, pos)
        elif char in _DIGITS or (char == "." and command[pos + 1:pos + 2] in tuple(_DIGITS)):
            token = scan_number(command, pos)
        elif char == "`":
            token = scan_backquoted(command, pos)
        elif char == "?":
            token = scan_parameter(command, pos)
        elif char in PUNCTUATION:
            token = Token(char, char, pos, pos + 1)
        else:
            token = scan_word(command, pos)
        if token is None:
            raise EsqlError(f"no token at {command[pos:pos + 20]!r}")
        out.append(token)
        pos = skip_hidden(command, token.end)
    return out


def string_value(token: Token) -> str:
    """What a string token stands for: the text between the quotes, escapes resolved (a triple-quoted
    string has none). See ``scan_string``."""
    if token.text.startswith('"""'):
        return token.text[3:-3]
    escapes = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: escapes[m.group(1)], token.text[1:-1])


# -- the command ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Constant:
    kind: str  # null, number, quantity, boolean, parameter, string or list
    tokens: tuple[Token, ...]
    text: str  # as written


@dataclass(frozen=True)
class Rerank:
    """A RERANK command as the parser reads it."""

    column: str  # the score column: the one named before ``=``, else _score
    query: Constant
    fields: tuple[str, ...]  # each as written: ``column`` or ``name = column``
    options: dict[str, Constant]  # the WITH map: key (unquoted) to value


class Reader:
    """The tokens of one command and a position in them; each ``read_*`` method checks one part."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.toks = tokens(command)
        self.at = 0

    def peek(self, offset: int = 0) -> Token | None:
        i = self.at + offset
        return self.toks[i] if i < len(self.toks) else None

    def is_(self, kind: str, word: str | None = None, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok is not None and tok.kind == kind and (word is None or tok.text.lower() == word)

    def take(self, kind: str, word: str | None = None) -> Token:
        if not self.is_(kind, word):
            found = self.peek()
            wanted = word.upper() if word else kind
            raise EsqlError(f"expected {wanted}, found {found.text if found else 'the end'!r}")
        self.at += 1
        return self.toks[self.at - 1]

    def source(self, first: Token, last: Token) -> str:
        return self.command[first.start:last.end]

    def read_command(self) -> Rerank:
        """The whole command, in this order: ``RERANK``; optionally a column name and ``=`` (the column the
        score goes to, ``_score`` when none is named); the query, a constant (``read_constant``); the
        keyword ``ON``; one or more fields separated by commas (``read_field``); optionally ``WITH`` and a
        map (``read_map``); then nothing more: no ``AS``, nothing before RERANK.

        Read from ``x-pack/plugin/esql/src/main/antlr/EsqlBaseParser.g4`` @
        d554ad564669530da10ceee6d199afecb7da23d5 (the RERANK command, its fields and its named
        parameters, with no development-only alternative).
        """
        self.take("keyword", "rerank")
        column = "_score"
        start = self.at
        try:
            name = self.read_name()
            self.take("=")
            column = name
        except EsqlError:
            self.at = start  # no column: what follows RERANK is the query
        query = self.read_constant()
        self.take("keyword", "on")
        fields = [self.read_field()]
        while self.is_(","):
            self.take(",")
            fields.append(self.read_field())
        options: dict[str, Constant] = {}
        if self.is_("keyword", "with"):
            self.take("keyword", "with")
            options = self.read_map()
        rest = self.peek()
        if rest is not None:
            raise EsqlError(f"nothing may follow the RERANK command, found {self.command[rest.start:]!r}")
        return Rerank(column, query, tuple(fields), options)

    def read_name(self) -> str:
        """A column name: one or more parts joined by dots, each part a bare or backquoted name, or a
        parameter (single or double) standing for one. Returned with backquotes resolved.

        Read from ``x-pack/plugin/esql/src/main/antlr/EsqlBaseParser.g4`` @
        d554ad564669530da10ceee6d199afecb7da23d5 (a qualified name in a release build is such a dotted
        name; the bracketed qualifier form is for development builds only).
        """
        parts = [self.read_name_part()]
        while self.is_("."):
            self.take(".")
            parts.append(self.read_name_part())
        return ".".join(parts)

    def read_name_part(self) -> str:
        tok = self.peek()
        if tok is None or tok.kind not in ("name", "quoted_name", "param", "double_param"):
            raise EsqlError(f"expected a column name, found {tok.text if tok else 'the end'!r}")
        self.at += 1
        return tok.text[1:-1].replace("``", "`") if tok.kind == "quoted_name" else tok.text

    def read_field(self) -> str:
        """One field RERANK sends: optionally a name and ``=`` (a column that is computed from the value),
        then the value. Elasticsearch takes any boolean expression as the value; this checker takes only
        a column name (``read_name``), so ``ON title, body`` and ``ON t = title`` pass and ``ON`` with no
        field does not.

        Read from ``x-pack/plugin/esql/src/main/antlr/EsqlBaseParser.g4`` @
        d554ad564669530da10ceee6d199afecb7da23d5 (the same field rule that EVAL and ROW use).
        """
        first = self.peek()
        self.read_name()
        if self.is_("="):
            self.take("=")
            self.read_name()
        return self.source(first, self.toks[self.at - 1])  # type: ignore[arg-type]

    def read_map(self) -> dict[str, Constant]:
        """A map: ``{``, then zero or more entries separated by commas, then ``}``. An entry is a string
        literal (the key: a quoted string, never a bare word), a colon, and a constant (``read_constant``).

        Read from ``x-pack/plugin/esql/src/main/antlr/parser/Expression.g4`` @
        00d1e4276e1489acb15dabd8f4c751f1f5d386a8.
        """
        self.take("{")
        entries: dict[str, Constant] = {}
        if not self.is_("}"):
            while True:
                key = string_value(self.take("string"))
                self.take(":")
                entries[key] = self.read_constant()
                if not self.is_(","):
                    break
                self.take(",")
        self.take("}")
        return entries

    def read_constant(self) -> Constant:
        """A constant, one of: ``null``; ``true`` or ``false``; a number, optionally signed, where an integer
        may be followed by a bare word as its unit (``1 day``); a single ``?`` parameter (not a double one);
        a string literal; or a non-empty list in square brackets, separated by commas, of numbers only, of
        booleans only, or of strings only.

        Read from ``x-pack/plugin/esql/src/main/antlr/parser/Expression.g4`` @
        00d1e4276e1489acb15dabd8f4c751f1f5d386a8.
        """
        first, begin = self.peek(), self.at
        if first is None:
            raise EsqlError("expected a constant, found the end")
        if self.is_("keyword", "null"):
            kind = "null"
            self.at += 1
        elif self.is_("keyword", "true") or self.is_("keyword", "false"):
            kind = "boolean"
            self.at += 1
        elif first.kind == "param":
            kind = "parameter"
            self.at += 1
        elif first.kind == "string":
            kind = "string"
            self.at += 1
        elif first.kind in ("+", "-", "integer", "decimal"):
            number = self.read_number()
            kind = "number"
            if number.kind == "integer" and self.is_("name"):
                kind = "quantity"
                self.at += 1
        elif first.kind == "[":
            kind = "list"
            self.read_list()
        else:
            raise EsqlError(f"expected a constant, found {first.text!r}")
        last = self.toks[self.at - 1]
        return Constant(kind, tuple(self.toks[begin:self.at]), self.source(first, last))

    def read_number(self) -> Token:
        if self.is_("+") or self.is_("-"):
            self.at += 1
        tok = self.peek()
        if tok is None or tok.kind not in ("integer", "decimal"):
            raise EsqlError(f"expected a number, found {tok.text if tok else 'the end'!r}")
        self.at += 1
        return tok

    def read_list(self) -> None:
        self.take("[")
        tok = self.peek()
        if tok is not None and tok.kind in ("+", "-", "integer", "decimal"):
            item = self.read_number
        elif self.is_("keyword", "true") or self.is_("keyword", "false"):
            def item() -> Token:
                if not (self.is_("keyword", "true") or self.is_("keyword", "false")):
                    raise EsqlError("a list of booleans holds only true and false")
                self.at += 1
                return self.toks[self.at - 1]
        else:
            def item() -> Token:
                return self.take("string")
        item()
        while self.is_(","):
            self.take(",")
            item()
        self.take("]")


# The reading rules, each a docstring with its source: the test module checks that every one cites one.
RULES = (skip_hidden, scan_string, scan_number, scan_word, scan_backquoted, scan_parameter, tokens,
         Reader.read_command, Reader.read_name, Reader.read_field, Reader.read_map, Reader.read_constant)


def read_rerank(command: str) -> Rerank:
    """``command`` read as a RERANK command; ``EsqlError`` if a release build would not parse it."""
    return Reader(command).read_command()
