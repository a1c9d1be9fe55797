"""What text the sidecar takes, in one torch-free place: the server's schemas, the bridge's client, the
embedded ``embed`` and ``es index`` ask the same questions before a text is scored or sent.

* :func:`sidecar_refusal`: why the sidecar refuses a text as a query or a text to embed (a lone
  surrogate, blank, over :data:`MAX_TEXT_CHARS`, or nothing left once the model's own preprocessing
  has run: ``"!!!"``, ``"\\u200b"``, ``"<p></p>"`` read as no token, the same as a blank text), or None.
* :func:`unscored_candidate`: why the sidecar gives a rerank candidate the lowest score without scoring it
  (``too_long``, ``blank``: every part blank, or read as no token), or None. A candidate with a blank
  title and a body is scored (the engines send ``title<p>body</p>`` as one string, which reads so), and
  the bridge's client leaves out of its request exactly what the server would not score.
* :func:`rerank_text`: the one string that stands for a question on the wire (the index's
  ``rerank_text`` field, what an engine sends the sidecar, and what the product's client sends to embed).
* :func:`model_part`: a query cut to what any model reads of it (:data:`MODEL_TEXT_CHARS` of the title
  and of the body), so an over-long query still searches: the first stage takes it whole, the sidecar
  its start, which is all the model reads anyway.
"""

from __future__ import annotations

import re

from es_plugin_bridge.core.model_config import MAX_LENGTH
from es_plugin_bridge.data.questions import question_from_text, question_id
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text.pipeline import Preprocessor

#: The longest text the sidecar takes (a title, a body, a string), in characters.
MAX_TEXT_CHARS = 100_000
#: The characters of a query's title and of its body sent to the model: 8 per token of the most any
#: model reads of one part (``MAX_LENGTH`` tokens; the shipped ones read 128 sub-words or fewer), so
#: the cut never changes what the model reads of a text of words (tested on the samples and on a
#: 200,000-character pasted log).
MODEL_TEXT_CHARS = 8 * MAX_LENGTH
PLACEHOLDER_START = "${"
#: ``$`` as an HTML character reference: every text the product sends through a template carries this
#: instead of ``${``, and the text pipeline decodes it back to ``$`` (titles and bodies alike).
SAFE_PLACEHOLDER_START = "&#36;{"
_JAVA_TRIM = "".join(map(chr, range(33)))  # what java.lang.String.trim strips: every char <= U+0020
_SURROGATE = re.compile("[\ud800-\udfff]")
_BLANK = re.compile(r"\s*")  # str.isspace's whitespace, as the server's schemas' NOT_BLANK_PATTERN


def template_safe(text: str) -> str:
    """``text`` with every ``${`` written ``&#36;{``: safe to pass through an inference template.

    Elasticsearch fills a ``custom`` endpoint's request template with commons-text's
    ``StringSubstitutor`` (which also substitutes inside the values it inserts) and then refuses the
    request if anything matching ``\\$\\{.*?\\}`` is left (``x-pack/plugin/inference/src/main/java/org/
    elasticsearch/xpack/inference/common/ValidatingSubstitutor.java``, run on the whole body by
    ``services/custom/request/CustomRequest.java``). A shell snippet such as ``${HOME}`` in a question
    would fail the search, and ``${api_key}`` would even be replaced by the secret. The product decodes
    character references in titles and bodies, so the tokens, vectors and scores are unchanged.
    """
    return text.replace(PLACEHOLDER_START, SAFE_PLACEHOLDER_START)


def rerank_text(question: Question) -> str:
    """The one string that stands for a question where Elasticsearch sends only a field's value, and
    the text the sidecar is sent to embed a question (``es index``, the modes' query, ``es setup``'s check).

    The sidecar reads a string as a title followed by its HTML body (split at the first tag), and
    the product parses every body as HTML anyway: so ``<`` in the title is escaped (it must not start
    the body) and a body that does not start with a tag is wrapped in ``<p>``. ``${`` is written
    ``&#36;{`` (:func:`template_safe`): Elasticsearch sends this string through a request template.
    The tokens are the question's own (tested on the shipped samples).
    """
    title = template_safe(question.title.replace("<", "&lt;"))
    body = template_safe(question.body)
    if not body:
        return title
    # Leading characters <= U+0020 are skipped, as Java's trim does: the ingest pipeline builds the same
    # string in Painless (elastic/ingest_pipeline.py).
    starts_with_tag = body.lstrip(_JAVA_TRIM).startswith("<")
    return f"{title}{body}" if starts_with_tag else f"{title}<p>{body}</p>"


def lone_surrogate(text: str) -> str | None:
    """Where ``text`` holds a lone UTF-16 surrogate (no text encodes it: ``str.encode`` raises), or None.

    ``U+DC80``–``U+DCFF`` is how Python hands over an invalid UTF-8 byte (``surrogateescape``)."""
    found = _SURROGATE.search(text)
    if found is None:
        return None
    code, position = ord(found.group()), found.start() + 1
    if 0xDC80 <= code <= 0xDCFF:
        return f"is not valid UTF-8: byte 0x{code - 0xDC00:02X} at character {position}"
    return f"holds a lone surrogate U+{code:04X} at character {position}, which is not Unicode text"


def is_blank(text: str) -> bool:
    """Empty or whitespace only."""
    return _BLANK.fullmatch(text) is not None


#: The start of a title read first: when its whole words (no markup, no entity) give a token, so does the
#: title, and the rest of a long text need not be preprocessed twice (here and when it is encoded).
_QUICK_CHARS = 1_000


def _starts_with_a_word(title: str, preprocessor: Preprocessor) -> bool:
    """Whether the start of ``title`` before any markup or entity (``<``, ``&``: what comes before them
    reads the same whatever follows, and shell snippets are full of ``&&``) gives a token."""
    head = title[:_QUICK_CHARS]
    markup = min((at for at in (head.find("<"), head.find("&")) if at >= 0), default=-1)
    if markup >= 0:
        head = head[:markup]
    if len(head) < len(title):
        head = head[:max(head.rfind(" "), 0)]  # no word cut in two (a stop word's start is no stop word)
    return bool(head) and bool(preprocessor.text_tokens(head))


def reads_nothing(question: Question, preprocessor: Preprocessor) -> bool:
    """Whether the model's preprocessing leaves no token of ``question`` (title and the body it reads)."""
    if _starts_with_a_word(question.title, preprocessor):
        return False
    return not preprocessor.title_tokens(question) and not preprocessor.body_tokens(question)


def sidecar_refusal(text: str | Question, preprocessor: Preprocessor | None = None) -> str | None:
    """Why the sidecar refuses ``text`` as a query or a text to embed, or None. With ``preprocessor``
    (the served model's) a text it reads as no token is refused as a blank one is: the model would give
    every such text one and the same vector."""
    parts = [text] if isinstance(text, str) else [text.title, text.body]
    for part in parts:
        where = lone_surrogate(part)
        if where is not None:
            return f"text {where}"
    if all(is_blank(part) for part in parts):
        return "text must not be empty"
    if any(len(part) > MAX_TEXT_CHARS for part in parts):
        return f"text is longer than {MAX_TEXT_CHARS} characters"
    if preprocessor is not None:
        question = question_from_text(text) if isinstance(text, str) else text
        if reads_nothing(question, preprocessor):
            return "text must not be empty once preprocessed (the model reads no word of it)"
    return None


def unscored_candidate(text: str | Question, preprocessor: Preprocessor | None = None) -> str | None:
    """Why the sidecar gives ``text`` as a rerank candidate the lowest score without scoring it
    (``too_long``: a part over :data:`MAX_TEXT_CHARS`; ``blank``: every part blank, or, with the served
    model's ``preprocessor``, read as no token), or None when it is scored. An engine needs one score per
    candidate, so none of these is refused."""
    parts = [text] if isinstance(text, str) else [text.title, text.body]
    if any(len(part) > MAX_TEXT_CHARS for part in parts):
        return "too_long"
    if all(is_blank(part) for part in parts):
        return "blank"
    if preprocessor is not None:
        question = question_from_text(text) if isinstance(text, str) else text
        if reads_nothing(question, preprocessor):
            return "blank"
    return None


def query_refusal(query: Question | str) -> str | None:
    """Why ``query`` cannot be searched at all (a lone surrogate, nothing but blanks), or None: the
    library's entry points (``BridgeSearch``, every mode's ``search``) raise it as the CLI does, one line
    (a UserError), instead of a UnicodeEncodeError from deep in a client."""
    parts = ([("the query", query)] if isinstance(query, str)
             else [("the query's title", query.title), ("the query's body", query.body)])
    for name, part in parts:
        where = lone_surrogate(part)
        if where is not None:
            return f"{name if isinstance(query, Question) and query.body else 'the query'} {where}"
    if all(is_blank(part) for _, part in parts):
        return "the query is empty"
    return None


def model_part(query: Question) -> Question:
    """``query`` as the model is sent it: title and body cut to :data:`MODEL_TEXT_CHARS` (itself when
    both fit); the id stays the query's own."""
    title, body = query.title[:MODEL_TEXT_CHARS], query.body[:MODEL_TEXT_CHARS]
    if (title, body) == (query.title, query.body):
        return query
    return Question(query.id or question_id(title, body), title, body)


__all__ = ["MAX_TEXT_CHARS", "MODEL_TEXT_CHARS", "is_blank", "lone_surrogate", "model_part", "query_refusal",
           "reads_nothing", "rerank_text", "sidecar_refusal", "template_safe", "unscored_candidate"]
