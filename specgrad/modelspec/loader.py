"""YAML text -> a tree of located YNodes: YAML 1.2 core-schema scalars, no tags, one document, bounded size and depth.
Uses pyyaml's reader, scanner, parser and composer only (never its constructors: nothing can run); imports errors and
files.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import yaml
from yaml.composer import Composer
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent, StreamEndEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from specgrad.modelspec.errors import Location, Problem, SpecError, excerpt
from specgrad.modelspec.files import open_regular

MAX_BYTES, MAX_DEPTH, MAX_NODES = 1_000_000, 64, 100_000
MAX_TEXT = 4_000_000  # NOTE: characters of text in a spec once aliases are expanded (an alias copies its anchor's)


@dataclass(eq=False)
class YNode:
    """A value read from a spec and where it was written. Aliases are expanded: each copy keeps its anchor's locations.

    map: value is dict[str, YNode] in file order and key_locs[key] is where the key itself is written.
    seq: value is list[YNode]. scalar: value is the resolved Python value, text the scalar's text before resolution
    (without quotes), quoted is True when it was not written plain (quoted, or a | or > block) and so is always a str.
    """

    value: Any
    loc: Location
    kind: Literal["map", "seq", "scalar"]
    text: str | None = None
    quoted: bool = False
    key_locs: dict[str, Location] | None = None

    def to_plain(self) -> Any:
        """Plain dicts, lists and scalars, without locations."""
        if self.kind == "map":
            return {k: v.to_plain() for k, v in self.value.items()}
        if self.kind == "seq":
            return [v.to_plain() for v in self.value]
        return self.value

    def get(self, key: str, default: YNode | None = None) -> YNode | None:
        """The child under `key` of a map; `default` when the key is absent or this node is not a map."""
        return self.value.get(key, default) if self.kind == "map" else default


# ---- YAML 1.2 core schema: https://yaml.org/spec/1.2.2/#1032-tag-resolution


def _decimal(s: str) -> int | float:
    # NOTE: Python's int() refuses more than 4300 digits (sys.get_int_max_str_digits); a number that long is past every
    # bound a spec has, so it reads as the float it is: infinity, refused as not finite where a number is wanted
    return int(s) if len(s) <= 4000 else float(s)


_CORE_SCALARS: tuple[tuple[re.Pattern[str], Callable[[str], Any]], ...] = (
    (re.compile(r"~|null|Null|NULL|"), lambda s: None),
    (re.compile(r"true|True|TRUE"), lambda s: True),
    (re.compile(r"false|False|FALSE"), lambda s: False),
    (re.compile(r"[-+]?[0-9]+"), _decimal),
    (re.compile(r"0o[0-7]+"), lambda s: int(s[2:], 8)),
    (re.compile(r"0x[0-9a-fA-F]+"), lambda s: int(s[2:], 16)),
    (re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"), float),
    (re.compile(r"[-+]?\.(inf|Inf|INF)"), lambda s: -math.inf if s[0] == "-" else math.inf),
    (re.compile(r"\.(nan|NaN|NAN)"), lambda s: math.nan),
)


def resolve_scalar(text: str) -> Any:
    """The value of a plain (unquoted) scalar by YAML 1.2's core schema: None, bool, int, float, or the text itself."""
    for pattern, convert in _CORE_SCALARS:
        if pattern.fullmatch(text):
            return convert(text)
    return text


# ---- locations and messages


def _loc_at(text: str, index: int, file: str) -> Location:
    """The location of text[index], counting line breaks the way pyyaml's marks do."""
    breaks = list(re.finditer(r"\r\n|[\r\n\x85\u2028\u2029]", text[:index]))
    return Location(file, len(breaks) + 1, index - (breaks[-1].end() if breaks else 0) + 1)


def _mark_loc(mark: yaml.Mark, file: str) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


def _tag_text(tag: str) -> str:
    if tag.startswith("tag:yaml.org,2002:"):
        return "!!" + tag[len("tag:yaml.org,2002:") :]
    return tag if tag.startswith("!") else f"!<{tag}>"


_TAG_HINT = "a spec is plain data: remove the tag (put the value in quotes if it is text)"
_INDENT_HINT = "check this line's indentation: entries at one level line up, and a list and a mapping cannot share one"
_QUOTE_HINT = "add the closing {quote}"
_ESCAPE_HINT = "use single quotes for text with backslashes, or write \\\\ for one backslash in double quotes"
_TOKEN_NAMES = {
    "<block end>": "the end of the block",
    "<block mapping start>": "a new key",
    "<block sequence start>": "a list",
    "?": "a key",
    "-": "a list item ('-')",
    "<scalar>": "a value",
    "<alias>": "an alias (*)",
    "<anchor>": "an anchor (&)",
    "<tag>": "a tag (!)",
    "<stream end>": "the end of the file",
    "<document start>": "'---'",
    "<document end>": "'...'",
    "<directive>": "a % directive",
}


class _Rule(NamedTuple):
    """How to reword one kind of pyyaml syntax error; message and hint may use {found} {ch} {n} {line} {col} {quote}."""

    problem: str  # regex on pyyaml's problem text
    message: str
    hint: str | None = None
    context: str = ""  # regex on pyyaml's context text
    at_context: bool = False  # report at the context mark (where the cause starts), not where pyyaml noticed


# fmt: off
_SYNTAX_RULES: tuple[_Rule, ...] = (
    _Rule(r"mapping values are not allowed here", "unexpected ':' here",
          "if the value itself contains ': ', put it in quotes; otherwise check this line's indentation"),
    _Rule(r"sequence entries are not allowed here", "a list item ('-') cannot start here",
          "put each '- item' on its own line, indented under its key"),
    _Rule(r"mapping keys are not allowed here", "an explicit key ('?') cannot start here"),
    _Rule(r"found character '\\t' that cannot start any token", "a tab character cannot be used here",
          "indent with spaces, not tabs"),
    _Rule(r"found character (?P<ch>.+) that cannot start any token", "a value cannot start with {ch}",
          "put the value in quotes"),
    _Rule(r"could not find expected ':'", "this key has no ':' after it",
          "write 'key: value' with a space after ':', or put text that spans several lines in quotes", at_context=True),
    _Rule(r"found unexpected end of stream", "this quoted text is never closed", _QUOTE_HINT, at_context=True),
    _Rule(r"found unexpected document separator", "this quoted text is not closed before the '---' line", _QUOTE_HINT,
          at_context=True),
    _Rule(r"found unknown escape character '(?P<ch>.*)'", "'\\{ch}' is not an escape that YAML knows", _ESCAPE_HINT),
    _Rule(r"expected escape sequence of (?P<n>\d+) hexadecimal", "this escape needs {n} hexadecimal digits",
          _ESCAPE_HINT),
    _Rule(r"expected alphabetic or numeric character",
          "an anchor (&name) or alias (*name) needs a name of letters, digits, '-' or '_'", context="anchor|alias"),
    _Rule(r"tag handle|expected '!'|expected URI|expected '>'", "tags are not allowed in a spec", _TAG_HINT),
    _Rule(r"expected <block end>, but found ':'", "a key is missing before ':'"),
    _Rule(r"expected <block end>, but found '(?P<tok>.+)'", "{found} is not expected here", _INDENT_HINT),
    _Rule(r"expected ',' or '\]', but got '(?P<tok>.+)'",
          "expected ',' or ']' here, but found {found}: the list opened on line {line}, column {col} is not closed",
          "separate items with ', ' and close the list with ']'"),
    _Rule(r"expected ',' or '}', but got '(?P<tok>.+)'",
          "expected ',' or '}}' here, but found {found}: the mapping opened on line {line}, column {col} is not closed",
          "separate entries with ', ' and close the mapping with '}}'"),
    _Rule(r"expected the node content, but found '(?P<tok>.+)'", "expected a value here, but found {found}"),
    _Rule(r"expected '<document start>', but found", "unexpected text after the end of the document ('...')",
          "a spec file holds one document: remove the '...' line"),
    _Rule(r"incompatible YAML document", "unsupported YAML version: specs are read as YAML 1.2",
          "remove the %YAML line"),
    _Rule(r"expected a comment or a line break", "after '|' or '>' the text must start on the next line",
          "start the text on the next line, indented", context="block scalar"),
)
# fmt: on


def _syntax_problem(e: yaml.MarkedYAMLError, file: str) -> Problem:
    """pyyaml's parse error, reworded; located at its problem mark, or at its context mark where that is the cause."""
    problem, context = e.problem or "", e.context or ""
    rule = next((r for r in _SYNTAX_RULES if re.search(r.problem, problem) and re.search(r.context, context)), None)
    if rule is None:
        said = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
        rule = _Rule("", said.replace("{", "{{").replace("}", "}}"))
    m = re.search(rule.problem, problem)
    at_context, message, hint = rule.at_context, rule.message, rule.hint
    mark = e.context_mark if at_context and e.context_mark is not None else e.problem_mark
    cmark = e.context_mark or mark
    fields = dict(m.groupdict() if m else {}, line=cmark.line + 1, col=cmark.column + 1)
    fields["found"] = _TOKEN_NAMES.get(fields.get("tok", ""), f"'{fields.get('tok')}'")
    fields["quote"] = cmark.buffer[cmark.pointer] if cmark.buffer else "quote"
    return Problem(message.format(**fields), _mark_loc(mark, file), hint and hint.format(**fields))


def _too_large(file: str, size: int | None, max_bytes: int) -> SpecError:
    said = f"{size:,} bytes" if size is not None else f"more than {max_bytes:,} bytes"
    return SpecError.at(
        Location(file, 1, 1),
        f"the file is too big: {said}, but a spec may be at most {max_bytes:,} bytes",
        "keep data in its own files (CSV, NPZ, text) and name them in the spec",
    )


def _too_deep(loc: Location, max_depth: int, alias: str | None = None) -> SpecError:
    who = f"alias *{excerpt(alias)} makes the spec nest" if alias else "the spec nests"
    return SpecError.at(
        loc,
        f"{who} too deep: more than {max_depth} levels of lists and mappings",
        "flatten the structure; no spec needs this many levels",
    )


def _too_much_text(loc: Location, max_text: int, alias: str | None) -> SpecError:
    who = f"alias *{excerpt(alias)} makes the spec's text" if alias else "the spec's text is"
    return SpecError.at(
        loc,
        f"{who} too long: more than {max_text:,} characters in all",
        "anchors (&) and aliases (*) can reuse a part of a spec, not multiply it; keep long text in its own files",
    )


def _too_many(loc: Location, max_nodes: int) -> SpecError:
    return SpecError.at(
        loc,
        f"the spec is too big: it has more than {max_nodes:,} values",
        "keep data in its own files (CSV, NPZ, text) and name them in the spec",
    )


# ---- text -> pyyaml nodes


class _Alias(Node):
    """An alias (*name) where it is used; `value` is the anchored node. Only this module sees it."""

    id = "alias"

    def __init__(self, target: Node, mark: yaml.Mark, name: str) -> None:
        super().__init__(None, target, mark, mark)
        self.name = name


class _SpecComposer(Reader, Scanner, Parser, Composer, BaseResolver):
    """pyyaml's composer, refusing tags, deep nesting, too many values, recursive aliases and a second document."""

    def __init__(self, text: str, file: str, max_depth: int, max_nodes: int, counted: int) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        BaseResolver.__init__(self)
        self.file, self.max_depth, self.max_nodes = file, max_depth, max_nodes
        self.depth, self.nodes, self.open_anchors = 0, counted, set()

    def loc(self, mark: yaml.Mark) -> Location:
        return _mark_loc(mark, self.file)

    def compose_spec(self) -> Node | None:
        self.get_event()  # stream start
        if self.check_event(StreamEndEvent):
            return None
        start = self.peek_event()
        if start.version is not None and start.version != (1, 2):
            raise SpecError.at(
                self.loc(start.start_mark),
                f"this spec asks for YAML {start.version[0]}.{start.version[1]}, but specs are read as YAML 1.2",
                "remove the %YAML line (in YAML 1.2 only true/false are booleans: yes, no, on, off are text)",
            )
        root = self.compose_document()
        if not self.check_event(StreamEndEvent):
            raise SpecError.at(
                self.loc(self.peek_event().start_mark),
                "a second YAML document starts here, but a spec file holds only one",
                "remove this '---' line, or put the second document in a file of its own",
            )
        return root

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            return self.compose_alias(self.get_event())
        if event.tag is not None:
            where = self.buffer.find("!", event.start_mark.index) if event.anchor else event.start_mark.index
            raise SpecError.at(
                _loc_at(self.buffer, where, self.file),
                f"tags are not allowed in a spec: {_tag_text(event.tag)}",
                _TAG_HINT,
            )
        if event.anchor in self.anchors:
            first = self.anchors[event.anchor].start_mark.line + 1
            raise SpecError.at(
                self.loc(event.start_mark),
                f"anchor &{excerpt(event.anchor)} is already defined on line {first}",
                "give this anchor another name",
            )
        self.nodes += not (isinstance(parent, MappingNode) and index is None)  # keys are not counted as values
        if self.nodes > self.max_nodes:  # NOTE: fails fast on big text; _Converter counts again through aliases
            raise _too_many(self.loc(event.start_mark), self.max_nodes)
        nests = isinstance(event, (SequenceStartEvent, MappingStartEvent))
        self.depth += nests
        if self.depth > self.max_depth:
            raise _too_deep(self.loc(event.start_mark), self.max_depth)
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        node = super().compose_node(parent, index)
        self.open_anchors.discard(event.anchor)
        self.depth -= nests
        return node

    def compose_alias(self, event: AliasEvent) -> _Alias:
        name, loc = event.anchor, self.loc(event.start_mark)
        shown = excerpt(name)
        if name in self.open_anchors:
            raise SpecError.at(
                loc,
                f"alias *{shown} is inside its own anchor &{shown}, so it would repeat forever",
                f"an alias can only reuse a part that is complete before it; move *{shown} out of &{shown}",
            )
        if name not in self.anchors:
            raise SpecError.at(
                loc, f"alias *{shown} has no anchor", f"define &{shown} on a value before using *{shown}"
            )
        return _Alias(self.anchors[name], event.start_mark, name)


# ---- pyyaml nodes -> YNodes


def _describe(value: Any) -> str:
    if value is None:
        return "empty (null)"
    return f"the boolean {str(value).lower()}" if isinstance(value, bool) else "a number"


class _Converter:
    """Builds YNodes, expanding aliases; counts every node made and every character of text, so an alias bomb fails
    after max_nodes of them or max_text characters."""

    def __init__(self, file: str, max_nodes: int, max_depth: int, max_text: int, counted: tuple[int, int]) -> None:
        self.file, self.max_nodes, self.max_depth, self.count = file, max_nodes, max_depth, counted[0]
        self.max_text, self.text = max_text, counted[1]
        self.locs: dict[int, Location] = {}  # id(node) -> its location, shared by every copy an alias makes

    def loc(self, node: Node) -> Location:
        if (loc := self.locs.get(id(node))) is None:
            loc = self.locs[id(node)] = _mark_loc(node.start_mark, self.file)
        return loc

    def convert(self, node: Node, depth: int, via: _Alias | None) -> YNode:
        """`depth` counts the lists and mappings around `node`; `via` is the outermost alias being expanded."""
        if isinstance(node, _Alias):
            return self.convert(node.value, depth, via or node)
        self.count += 1
        if self.count > self.max_nodes:
            raise self.too_big(node, via)
        if isinstance(node, ScalarNode):
            self.text += len(node.value)
            if self.text > self.max_text:
                raise _too_much_text(self.loc(via or node), self.max_text, via and via.name)
            plain = node.style is None
            value = resolve_scalar(node.value) if plain else node.value
            return YNode(value, self.loc(node), "scalar", text=node.value, quoted=not plain)
        if depth >= self.max_depth:  # NOTE: only through aliases: the composer has checked the text's own nesting
            raise _too_deep(self.loc(via or node), self.max_depth, via and via.name)
        if isinstance(node, SequenceNode):
            return YNode([self.convert(item, depth + 1, via) for item in node.value], self.loc(node), "seq")
        return self.mapping(node, depth, via)

    def mapping(self, node: MappingNode, depth: int, via: _Alias | None) -> YNode:
        value: dict[str, YNode] = {}
        key_locs: dict[str, Location] = {}
        for key_node, value_node in node.value:
            key, loc = self.key(key_node), self.loc(key_node)
            if key in value:
                raise SpecError.at(
                    loc,
                    f"duplicate key '{excerpt(key)}': it is already set on line {key_locs[key].line}",
                    "remove one of them (YAML would silently keep only the last one)",
                )
            key_locs[key] = loc
            value[key] = self.convert(value_node, depth + 1, via)
        return YNode(value, self.loc(node), "map", key_locs=key_locs)

    def key(self, node: Node) -> str:
        loc = self.loc(node)
        if isinstance(node, _Alias):
            raise SpecError.at(loc, f"an alias (*{excerpt(node.name)}) cannot be a key: keys must be plain names")
        if not isinstance(node, ScalarNode):
            what = "a list" if isinstance(node, SequenceNode) else "a mapping"
            raise SpecError.at(loc, f"{what} cannot be a key: keys must be plain names")
        value = node.value if node.style is not None else resolve_scalar(node.value)
        if isinstance(value, str):
            return value
        if value is None:
            raise SpecError.at(loc, "a key is missing here: keys must be plain names")
        raise SpecError.at(
            loc,
            f"key {excerpt(node.value)} is read as {_describe(value)}: keys must be plain names",
            f"use a name that starts with a letter, or write '{excerpt(node.value)}' in quotes if you mean the text",
        )

    def too_big(self, node: Node, via: _Alias | None) -> SpecError:
        if via is None:
            return _too_many(self.loc(node), self.max_nodes)
        return SpecError.at(
            self.loc(via),
            f"alias *{excerpt(via.name)} makes the spec too big: it grows past {self.max_nodes:,} values",
            "anchors (&) and aliases (*) can reuse a part of a spec, not multiply it",
        )


# ---- entry points


def parse_yaml(
    text: str,
    filename: str,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_text: int = MAX_TEXT,
    counted: tuple[int, int] = (0, 0),
) -> YNode:
    """Parse spec text; `filename` is only used in locations. `counted` is the values and text already read into the
    same spec (from the specs it extends), counted against max_nodes and max_text too. Raises SpecError."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _too_large(filename, size, max_bytes)
    try:
        root = _SpecComposer(text, filename, max_depth, max_nodes, counted[0]).compose_spec()
    except ReaderError as e:
        raise SpecError.at(
            _loc_at(text, e.position, filename),
            f"the character U+{e.character:04X} is not allowed in a spec",
            "remove it (YAML text cannot hold control characters; is this a binary file?)",
        ) from None
    except yaml.MarkedYAMLError as e:
        raise SpecError(_syntax_problem(e, filename)) from None
    if root is None or (isinstance(root, ScalarNode) and root.style is None and root.value == ""):
        raise SpecError.at(
            Location(filename, 1, 1), "the spec is empty", "write the spec's settings as 'key: value' lines"
        )
    return _Converter(filename, max_nodes, max_depth, max_text, counted).convert(root, 0, None)


def load_yaml(
    path: str | os.PathLike[str],
    *,
    text: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
    max_text: int = MAX_TEXT,
    counted: tuple[int, int] = (0, 0),
) -> YNode:
    """Read and parse a spec file (or `text`, located as `path`); only a regular file is read. Raises SpecError."""
    file = os.fspath(path)
    if text is None:
        text = _read_text(file, max_bytes)
    return parse_yaml(text, file, max_bytes=max_bytes, max_depth=max_depth, max_nodes=max_nodes, max_text=max_text,
                      counted=counted)  # fmt: skip


def measure(node: YNode) -> tuple[int, int]:
    """(values, characters of text) in a tree, counted as the loader counts them against MAX_NODES and MAX_TEXT."""
    if node.kind == "map":
        sizes = [measure(v) for v in node.value.values()]
    elif node.kind == "seq":
        sizes = [measure(v) for v in node.value]
    else:
        return 1, len(node.text) if node.text is not None else 0
    return 1 + sum(n for n, _ in sizes), sum(t for _, t in sizes)


def _read_text(file: str, max_bytes: int) -> str:
    f, size = open_regular(file)  # NOTE: a FIFO, device or folder is refused, never waited on or read
    with f:
        if size > max_bytes:  # NOTE: before reading, so a huge file is refused at once
            raise _too_large(file, size, max_bytes)
        try:
            data = f.read(max_bytes + 1)  # NOTE: bounded: a file can grow while it is read
        except OSError as e:
            raise SpecError.at(None, f"cannot read {file}: {(e.strerror or str(e)).lower()}") from None
    if len(data) > max_bytes:
        raise _too_large(file, None, max_bytes)
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8")
        raise SpecError.at(
            _loc_at(before, len(before), file),
            f"the file is not UTF-8 text: byte 0x{data[e.start]:02X} cannot be read here",
            "save the file as UTF-8",
        ) from None
