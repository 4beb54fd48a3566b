"""The run configuration file: valid files load, every bad field is named in the error."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas.config import RunConfig
from tasks.errors import InputError
from tasks.runs.config import config_hash, load_run_config

GOOD = """
name: nightly
datasets:
  - kind: demo
  - kind: judgebench
    path: data/jb.jsonl
judges:
  - name: strong
    base_url: http://127.0.0.1:8000/v1
    model: strong
    api_key_env: JUDGE_KEY
    configs:
      - name: low
        extra: {reasoning_effort: low}
      - name: high
        extra: {reasoning_effort: high}
k: 4
schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_good_config_loads_with_defaults(tmp_path: Path) -> None:
    config = load_run_config(_write(tmp_path, GOOD))
    assert isinstance(config, RunConfig)
    assert [c.name for c in config.judges[0].configs] == ["low", "high"]
    assert config.designs == ["common", "independent", "balanced"]
    assert config.policies == ["full", "nonstrict", "strict", "paired_unanimity"]
    assert config.schedule.timezone == "Europe/Berlin"
    again = load_run_config(_write(tmp_path, GOOD))
    assert config_hash(config) == config_hash(again)
    changed = load_run_config(_write(tmp_path, GOOD.replace("k: 4", "k: 6")))
    assert config_hash(changed) != config_hash(config)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("k: 4", "k: 4\nbatch_sizes: 10"), r"batch_sizes: unknown field"),
        (("    model: strong", "    model: strong\n    temprature: 0.5"), r"judges\.0\.temprature"),
        (("k: 4", "k: 3"), r"k: .*even"),
        (("k: 4", "k: 18"), r"k: .*16"),
        (("k: 4", "k: 100"), r"k: .*16"),
        (("k: 4", "k: 4\ndesigns: []"), r"designs: .*at least 1"),
        (("k: 4", "k: 4\npolicies: []"), r"policies: .*at least 1"),
        (("timezone: Europe/Berlin", "timezone: Mars/Olympus"), r"schedule\.timezone.*Mars"),
        (("http://127.0.0.1:8000/v1", "127.0.0.1:8000"), r"judges\.0.*base_url"),
        (
            ("  - kind: judgebench\n    path: data/jb.jsonl", "  - kind: rmbench"),
            r"datasets\.1.*path",
        ),
        (("k: 4", "k: 4\ndesigns: [common, zigzag]"), r"designs\.1"),
        (("        extra: {reasoning_effort: high}", "        extra: 7"), r"configs\.1\.extra"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    old, new = edit
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(InputError, match=expected) as info:
        load_run_config(path)
    assert str(path) in str(info.value)


def test_duplicate_judges_and_missing_sections(tmp_path: Path) -> None:
    judge = "  - {name: strong, base_url: 'http://127.0.0.1:1/v1', model: m}\n"
    text = "datasets: [{kind: demo}]\njudges:\n" + judge + judge
    with pytest.raises(InputError, match="duplicate judge names"):
        load_run_config(_write(tmp_path, text))
    with pytest.raises(InputError, match="judges: Field required"):
        load_run_config(_write(tmp_path, "datasets: [{kind: demo}]\n"))


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_run_config(tmp_path / "absent.yaml")
    with pytest.raises(InputError, match="not valid YAML"):
        load_run_config(_write(tmp_path, "judges: [unclosed\n"))
    with pytest.raises(InputError, match="YAML mapping"):
        load_run_config(_write(tmp_path, "- just\n- a list\n"))


def test_paths_are_relative_to_the_config_file_and_work_dir_flag_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.runs.config import choose_work_dir

    folder = tmp_path / "configs"
    folder.mkdir()
    config = folder / "mine.yaml"
    config.write_text(
        "datasets: [{kind: table, path: data/mine.csv, mapping: 'question=q'}]\n"
        "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]\n"
        "work_dir: nightly-work\n",
        "utf-8",
    )
    monkeypatch.chdir(tmp_path)  # the shell is elsewhere
    cfg = load_run_config("configs/mine.yaml")
    assert cfg.datasets[0].path == str(folder / "data" / "mine.csv")
    assert cfg.work_dir == str(folder / "nightly-work")

    assert choose_work_dir(cfg, None) == (str(folder / "nightly-work"), None)
    chosen, note = choose_work_dir(cfg, "other")
    assert chosen == str(tmp_path / "other")
    assert note is not None and str(tmp_path / "other") in note and "nightly-work" in note
    assert choose_work_dir(cfg, str(folder / "nightly-work")) == (
        str(folder / "nightly-work"),
        None,
    )
    url, note = choose_work_dir(cfg, "s3://bucket/prefix/")  # a store URL stays one
    assert url == "s3://bucket/prefix" and note is not None and url in note
    stored = cfg.model_copy(update={"work_dir": "gs://bucket/work"})
    assert choose_work_dir(stored, None) == ("gs://bucket/work", None)


def test_a_judge_its_model_refuses_is_named_with_the_file(tmp_path: Path) -> None:
    """An effort the model does not take: one paragraph naming the file, before any call."""
    text = (
        "datasets: [{kind: demo}]\njudges:\n"
        "  - {name: g, base_url: 'https://api.openai.com/v1', model: gpt-5.2, reasoning: true,\n"
        "     configs: [{name: m, reasoning_effort: minimal}]}\n"
    )
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=r"run.yaml: judge 'g' config 'm': reasoning_effort"):
        load_run_config(path)
    store = text.replace("reasoning: true,", "reasoning: true, extra: {store: true},")
    with pytest.raises(InputError, match="extra.store"):
        load_run_config(_write(tmp_path, store.replace("minimal", "low")))


def _alias_bomb(levels: int, indent: str = "") -> str:
    """Anchors that each repeat the one before nine times: 9**levels values from a few
    hundred bytes (a "billion laughs")."""
    lines = [f"{indent}l0: &l0 [{', '.join(['lol'] * 9)}]"]
    for n in range(1, levels):
        lines.append(f"{indent}l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """531,441 values from 460 bytes of anchors in a judge's free-form `extra` (an alias
    bomb of nine levels, 1,290 bytes, ran `run --dry-run` into MemoryError)."""
    text = GOOD.replace(
        "    api_key_env: JUDGE_KEY\n",
        "    api_key_env: JUDGE_KEY\n    extra:\n" + _alias_bomb(6, "      "),
    )
    path = _write(tmp_path, text)
    assert len(text) < 1000
    with pytest.raises(InputError, match="aliases") as caught:
        load_run_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


def test_anchors_and_merge_keys_of_a_few_values_still_load(tmp_path: Path) -> None:
    text = GOOD.replace(
        "      - name: high\n        extra: {reasoning_effort: high}\n",
        "      - &high {name: high, extra: {reasoning_effort: high}}\n"
        "      - {<<: *high, name: higher}\n",
    )
    config = load_run_config(_write(tmp_path, text))
    assert [c.name for c in config.judges[0].configs] == ["low", "high", "higher"]
    assert config.judges[0].configs[2].extra == {"reasoning_effort": "high"}


@pytest.mark.parametrize(
    ("value", "words"),
    [("&a [*a]", "refers to itself"), ("[" * 20_000 + "]" * 20_000, "nested")],
    ids=["loop", "deep"],
)
def test_a_recursive_or_too_deep_yaml_is_one_paragraph(
    tmp_path: Path, value: str, words: str
) -> None:
    text = GOOD.replace("    api_key_env: JUDGE_KEY\n", f"    extra: {{a: {value}}}\n")
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=words) as caught:
        load_run_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
