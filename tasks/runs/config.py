"""Reading the run configuration: YAML in, a validated RunConfig or an error naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from schemas.config import RunConfig
from tasks.errors import InputError, describe_validation
from tasks.hashing import canonical_json, sha256_text
from tasks.store import is_store_url
from tasks.store.workdir import DEFAULT_WORK_DIR


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated mapping key (PyYAML silently keeps the last one,
    so `k: 4` followed by `k: 2` would run K=2 without a word)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base` may be overridden by design
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:
            continue  # an unhashable key: the constructor reports it
        if first != key_node.start_mark.line + 1:
            raise yaml.constructor.ConstructorError(
                None, None, f"repeated key {key!r} (first at line {first})", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)

MAX_YAML_VALUES = 100_000
"""The most values a YAML file of judgeline's may stand for once its aliases are expanded.
PyYAML builds an alias as a second reference to the anchored value, so a few hundred bytes
of anchors repeating each other ("billion laughs") load in a millisecond, and then every
reader of the data (validation, hashing, JSON) walks billions of values. A run
configuration holds a few thousand at most."""


def _expanded_values(root: yaml.Node) -> int:
    """How many values `root` stands for with every alias written out (iterative: as deep
    as the composer could go); ValueError for a node that contains itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        if children_done:
            on_path.discard(key)
            sizes[key] = min(MAX_YAML_VALUES + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ValueError(f"line {node.start_mark.line + 1}")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _load(text: str, source: Path, what: str) -> Any:
    """The data of one YAML document, refused (InputError) if its aliases expand past
    MAX_YAML_VALUES or refer to themselves."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            values = _expanded_values(node)
        except ValueError as exc:
            raise InputError(
                f"the {what} has an alias (*name) that refers to itself ({exc}); write the "
                "value out",
                file=str(source),
            ) from None
        if values > MAX_YAML_VALUES:
            raise InputError(
                f"the {what} stands for more than {MAX_YAML_VALUES:,} values once its aliases "
                "(&name, *name) are expanded; write the values out, or use fewer aliases",
                file=str(source),
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: str | Path, what: str) -> Any:
    """A YAML file's data; unreadable, non-UTF-8 or malformed files, repeated keys, and
    aliases that expand past MAX_YAML_VALUES are an InputError naming the file (and the
    line), `what` saying which file it is."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the {what}: {exc.strerror}", file=str(source)) from None
    except UnicodeDecodeError as exc:
        line = source.read_bytes()[: exc.start].count(b"\n") + 1
        problem = f"the {what} is not UTF-8 text: invalid byte at line {line}"
        raise InputError(problem, file=str(source)) from None
    try:
        return _load(text, source, what)
    except RecursionError:
        raise InputError(f"the {what} is nested too deeply to read", file=str(source)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({exc.context})" if exc.context else ""
        raise InputError(
            f"not valid YAML{where}: {exc.problem}{context}", file=str(source)
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(source)) from None


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run configuration; errors name the file and the field."""
    source = Path(path)
    raw = read_yaml(source, "run configuration")
    if not isinstance(raw, dict):
        raise InputError("a run configuration is a YAML mapping", file=str(source))
    try:
        config = _relative_to(RunConfig.model_validate(raw), source.resolve().parent)
    except ValidationError as exc:
        problem = f"invalid run configuration: {describe_validation(exc)}"
        raise InputError(problem, file=str(source)) from None
    from tasks.prompts.preflight import check_judges

    try:
        check_judges(config.judges)
    except InputError as exc:
        raise InputError(exc.problem, file=str(source)) from None
    return config


def _relative_to(config: RunConfig, folder: Path) -> RunConfig:
    """The configuration with relative dataset paths and work_dir taken from `folder` (the
    configuration file's), whichever directory the command runs in."""

    def resolve(path: str | None) -> str | None:
        return None if path is None else str(folder / Path(path).expanduser())

    datasets = [d.model_copy(update={"path": resolve(d.path)}) for d in config.datasets]
    work_dir = config.work_dir
    if work_dir is not None and not is_store_url(work_dir):
        work_dir = resolve(work_dir)
    return config.model_copy(update={"datasets": datasets, "work_dir": work_dir})


def _address(work_dir: str) -> str:
    """A work dir as `WorkDir.address` names it: a store URL, or a resolved path."""
    return work_dir.rstrip("/") if is_store_url(work_dir) else str(Path(work_dir).resolve())


def choose_work_dir(config: RunConfig, given: str | None) -> tuple[str, str | None]:
    """The work dir of a run (a path or a store URL), and a note when the command line
    overrode the configuration.

    `--work-dir` (or JUDGELINE_WORK_DIR) beats the configuration's `work_dir`, which beats
    the default `./work`."""
    if given is None:
        return _address(config.work_dir or str(DEFAULT_WORK_DIR)), None
    chosen = _address(given)
    if config.work_dir is None or _address(config.work_dir) == chosen:
        return chosen, None
    return chosen, (
        f"work dir {chosen} (from --work-dir or JUDGELINE_WORK_DIR) is used, not the "
        f"configuration's work_dir {config.work_dir}"
    )


def config_hash(config: RunConfig) -> str:
    """SHA-256 of the configuration's canonical JSON (it holds no credentials)."""
    return sha256_text(canonical_json(config.model_dump(mode="json")))
