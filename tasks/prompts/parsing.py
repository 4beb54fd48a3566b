"""Reply parsing: a judge's raw reply to a slot label under its template's output contract.

The parser only ever returns slot labels (`Left`/`Right`/`Tie`/`Abstain`/`Invalid`);
nothing in a reply can name an identity. `Invalid` carries a note saying why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.calls import TRUNCATED_FINISH_REASONS
from schemas.vocabulary import SlotLabel, Strength
from tasks.prompts.templates import get_template
from tasks.prompts.verdicts import VERDICT_LABELS, is_structured, parse_structured

__all__ = [
    "EMPTY_REPLY",
    "PARSER_VERSION",
    "TRUNCATED_NOTE",
    "ParsedReply",
    "note_reason",
    "parse_reply",
]

TRUNCATED_NOTE = "truncated: "
"""How the note of a reply cut by the token limit starts (the run's reasons count them)."""

PARSER_VERSION = "3"
"""Stored with every parsed label; bump it whenever the label of a stored reply that was not
cut by the token limit changes (labelling cut replies Invalid did not bump it; 3 reads
structured verdicts, `tasks.prompts.verdicts`)."""


@dataclass(frozen=True)
class ParsedReply:
    """A reply's slot label, its strength where the template has one, and why if Invalid."""

    label: SlotLabel
    strength: Strength | None
    note: str | None


EMPTY_REPLY = "empty reply"
"""The note of a reply with no text but whitespace (a reply, not a failed call)."""


def _invalid(note: str) -> ParsedReply:
    return ParsedReply(label="Invalid", strength=None, note=note)


# --- arena-hard-v1 ------------------------------------------------------------------------

_ARENA_VERDICTS = VERDICT_LABELS["arena-hard-v1"]
# Anything in double brackets made only of slot letters and comparison signs is an attempt
# at a verdict; other bracketed text (wiki links, templates) is ignored.
_BRACKETED = re.compile(r"\[\[([^\[\]\n]{1,24})\]\]")
_VERDICTISH = re.compile(r"^(?:[AB<>=]+|abstain)$", re.IGNORECASE)
# Examples are not verdicts: a label in a fenced code block, or after an example cue in the
# same sentence (the prompt's own `Example output: "My final verdict is tie: [[A=B]]"` echoed
# back). A cue in an earlier sentence of the line does not make the verdict an example
# ("For example, A misses the edge case. Therefore, my final verdict is [[B]]."). Quotes alone
# do not make an example: o1-mini often quotes its real final verdict. Only a closed fence
# fences: an opening ``` that is never closed does not swallow the rest of the reply.
_FENCED = re.compile(r"```.*?```", re.DOTALL)
_EXAMPLE_CUE = re.compile(r"\b(?:example|e\.g\.|for instance)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def _after_example_cue(line: str, start: int) -> bool:
    """Whether the label at `start` shares its sentence with an example cue before it."""
    cues = list(_EXAMPLE_CUE.finditer(line, 0, start))
    return bool(cues) and not _SENTENCE_END.search(line, cues[-1].end(), start)


def _closing_block(text: str, fences: list[re.Match[str]]) -> re.Match[str] | None:
    """The fenced block that ends the reply, when the judge put its own verdict there.

    A reply whose prose ends in a fenced block (only whitespace after it) gives its verdict in
    that block, unless the line that introduces the block is an example cue or there is no
    prose before it at all (a reply that is only a fenced label is an echoed format example).
    """
    if not fences or text[fences[-1].end() :].strip():
        return None
    before = text[: fences[-1].start()].strip()
    if not before or _EXAMPLE_CUE.search(before.rsplit("\n", 1)[-1]):
        return None
    return fences[-1]


def _verdict_tokens(text: str) -> tuple[list[str], int]:
    """Bracketed tokens outside examples, and how many bracketed tokens were examples."""
    fences = list(_FENCED.finditer(text))
    closing = _closing_block(text, fences)
    own = closing.start() if closing is not None else -1
    quoted = [f.group(0) for f in fences if f.start() != own]
    examples = len(_BRACKETED.findall("".join(quoted)))
    prose = _FENCED.sub(lambda f: f.group(0).strip("`") if f.start() == own else "\n", text)
    tokens: list[str] = []
    for line in prose.split("\n"):
        for match in _BRACKETED.finditer(line):
            if _after_example_cue(line, match.start()):
                examples += 1
            else:
                tokens.append(match.group(1))
    return tokens, examples


def _parse_arena(text: str) -> ParsedReply:
    if not text.strip():
        return _invalid(EMPTY_REPLY)
    tokens, examples = _verdict_tokens(text)
    seen: list[str] = []
    off_contract: list[str] = []
    for raw in tokens:
        token = re.sub(r"\s+", "", raw).upper()
        if token in _ARENA_VERDICTS:
            if token not in seen:
                seen.append(token)
        elif _VERDICTISH.match(token):
            off_contract.append(f"[[{raw}]]")
    if off_contract:
        return _invalid(f"verdict label {off_contract[0]} is not one of the template's labels")
    if not seen:
        if examples:
            return _invalid("verdict labels only inside an example or code block, no verdict")
        return _invalid("no verdict label [[...]] in the reply")
    if len(seen) > 1:
        listed = ", ".join(f"[[{t}]]" for t in seen)
        return _invalid(f"conflicting verdict labels {listed}")
    label, strength = _ARENA_VERDICTS[seen[0]]
    return ParsedReply(label=label, strength=strength, note=None)


# --- fastchat-pair-v2 ----------------------------------------------------------------------

_FASTCHAT_VERDICTS = {v: label for v, (label, _) in VERDICT_LABELS["fastchat-pair-v2"].items()}


def _parse_fastchat(text: str) -> ParsedReply:
    """FastChat's `[[A]]`/`[[B]]`/`[[C]]` (tie), read like the Arena-Hard labels: examples
    ignored, one distinct label or Invalid (FastChat itself takes the first of A, B, C)."""
    if not text.strip():
        return _invalid(EMPTY_REPLY)
    tokens, examples = _verdict_tokens(text)
    seen = list(dict.fromkeys(re.sub(r"\s+", "", t).upper() for t in tokens))
    verdicts = [t for t in seen if t in _FASTCHAT_VERDICTS]
    off = [t for t in seen if t not in _FASTCHAT_VERDICTS and _VERDICTISH.match(t)]
    if off:
        return _invalid(f"verdict label [[{off[0]}]] is not one of the template's labels")
    if not verdicts:
        if examples:
            return _invalid("verdict labels only inside an example or code block, no verdict")
        return _invalid("no verdict label [[...]] in the reply")
    if len(verdicts) > 1:
        return _invalid(f"conflicting verdict labels {', '.join(f'[[{t}]]' for t in verdicts)}")
    return ParsedReply(label=_FASTCHAT_VERDICTS[verdicts[0]], strength=None, note=None)


# --- judgebench-vanilla-v1 ----------------------------------------------------------------

_VANILLA_VERDICTS = {
    v.casefold(): label for v, (label, _) in VERDICT_LABELS["judgebench-vanilla-v1"].items()
}
_VANILLA_WRAPPERS = " \t\r\n*\"'`“”"


def _parse_vanilla(text: str) -> ParsedReply:
    core = text.strip(_VANILLA_WRAPPERS)
    core = core[:-1] if core.endswith(".") else core
    core = core.strip(_VANILLA_WRAPPERS).casefold()
    if core in _VANILLA_VERDICTS:
        return ParsedReply(label=_VANILLA_VERDICTS[core], strength=None, note=None)
    if not core:
        return _invalid(EMPTY_REPLY)
    folded = text.casefold()
    named = [v for v in ("output (a)", "output (b)") if v in folded]
    if len(named) == 2:
        return _invalid("reply names both Output (a) and Output (b)")
    if named:
        return _invalid(f"reply has words besides the verdict {named[0]!r} (contract: only it)")
    return _invalid("reply is not one of Output (a), Output (b), Tie, Abstain")


# --- json-strict-v1 -----------------------------------------------------------------------

_JSON_VERDICTS: dict[str, SlotLabel] = {
    "left": "Left",
    "right": "Right",
    "tie": "Tie",
    "abstain": "Abstain",
}
_JSON_KEYS = {"verdict", "strength", "reason"}


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _parse_json(text: str) -> ParsedReply:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return _invalid("reply is not only a JSON object (prose or a code fence around it)")
    try:
        obj = json.loads(body, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        return _invalid(f"JSON key {exc.args[0]!r} is repeated")
    except json.JSONDecodeError as exc:
        return _invalid(f"reply is not valid JSON: {exc.msg} at char {exc.pos}")
    extra = sorted(set(obj) - _JSON_KEYS)
    if extra:
        return _invalid(f"JSON has keys outside the contract: {extra}")
    if "verdict" not in obj:
        return _invalid("JSON has no 'verdict'")
    verdict = obj["verdict"]
    if not isinstance(verdict, str) or verdict not in _JSON_VERDICTS:
        return _invalid(f"verdict {verdict!r} is not one of left, right, tie, abstain")
    label = _JSON_VERDICTS[verdict]
    strength = obj.get("strength")
    if label in ("Left", "Right"):
        if strength not in ("strong", "weak", None):
            return _invalid(f"strength {strength!r} is not strong, weak or null")
    elif strength is not None:
        return _invalid(f"strength {strength!r} given with verdict {verdict!r} (must be null)")
    reason = obj.get("reason")
    if reason is not None and not isinstance(reason, str):
        return _invalid(f"reason is a {type(reason).__name__}, not a string")
    return ParsedReply(label=label, strength=strength, note=None)


_PARSERS: dict[str, Callable[[str], ParsedReply]] = {
    "arena-hard-v1": _parse_arena,
    "judgebench-vanilla-v1": _parse_vanilla,
    "fastchat-pair-v2": _parse_fastchat,
    "json-strict-v1": _parse_json,
}


def parse_reply(template_id: str, text: str, finish_reason: str | None = None) -> ParsedReply:
    """Parse one raw reply under the template's output contract (unknown id: InputError).

    A reply cut by the token limit (`finish_reason` `length` or `max_tokens`) is Invalid
    with a `truncated` note, even if its text already holds a verdict: what was cut could
    have changed or contradicted it. A structured verdict (`verdict: json`: a JSON object of
    exactly `reasoning` and `verdict`) is read against the template's labels
    (`tasks.prompts.verdicts`); other replies parse as before, whatever their finish.
    """
    get_template(template_id)
    if finish_reason in TRUNCATED_FINISH_REASONS:
        return _invalid(
            f"{TRUNCATED_NOTE}the reply was cut by the token limit (finish_reason "
            f"{finish_reason!r}); raise the judge's max_tokens"
        )
    if is_structured(text):
        label, strength, note = parse_structured(template_id, text)
        return ParsedReply(label=label, strength=strength, note=note)
    return _PARSERS[template_id](text)


def note_reason(note: str | None) -> str:
    """The reason an Invalid note gives, without the labels or values it quotes, so that
    replies without a verdict can be counted by reason ("conflicting verdict labels")."""
    if not note:
        return "no note"
    text = re.sub(r"\s*'[^']*'|\s*\[\[[^\]]*\]\](?:,\s*\[\[[^\]]*\]\])*", "", note)
    return " ".join(re.split(r":|\s\(", text, maxsplit=1)[0].split())
