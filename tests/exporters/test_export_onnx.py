"""``export-onnx`` end to end: tiny real checkpoints → model directories scored by onnxruntime.

Checks that the exported directory scores real SemEval questions as ``NeuralScorer`` does (torch),
that serving needs no torch, that the manifest catches any changed, missing or added file, and
the CLI's overwrite and bad-input behaviour.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.cli.export import main as export_main
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.fusion_fit import fuse
from es_plugin_bridge.training.torch_scorer import NeuralScorer

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
BIN = Path(sys.executable).parent
TYPES = ("bow-cnn", "gru")  # the tiny models of conftest.checkpoints


@pytest.fixture(scope="module")
def semeval():
    return read_spec(f"semeval:{SEMEVAL_DEV}").queries[:12]


@pytest.mark.parametrize("model_type", list(TYPES))
def test_onnx_scores_equal_neural_scorer_on_real_questions(model_type, checkpoints, exported, semeval):
    model, featurizer, source = load_checkpoint(checkpoints[model_type])
    scorer = NeuralScorer(model, featurizer)
    served = ModelDirectory.load(exported[model_type], threads=1, batch_size=4)  # several batches per call
    stage = source["fusion"]["default"]
    for rq in semeval:
        expected = scorer.components(rq.query, rq.candidates)
        got = served.rerank(rq.query, rq.candidates, rq.first_stage_scores, first_stage=stage)
        assert set(got) == {"neural", "bow", "model", "fused"}
        for name in ("neural", "bow", "model"):
            np.testing.assert_allclose(got[name], expected[name], atol=1e-4, rtol=0)
        weights = source["fusion"]["first_stages"][stage]["weights"]
        features = {"first_stage": np.asarray(rq.first_stage_scores), **expected}
        np.testing.assert_allclose(got["fused"], fuse(features, weights), atol=1e-4, rtol=0)
    # the bow component is not the neural one: the test above compares two different paths
    assert not np.allclose(expected["bow"], expected["neural"])


@pytest.mark.parametrize("model_type", list(TYPES))
def test_encode_gives_the_torch_models_vectors_and_weighted_terms(model_type, checkpoints, exported, semeval):
    model, featurizer, _ = load_checkpoint(checkpoints[model_type])
    scorer = NeuralScorer(model, featurizer)
    served = ModelDirectory.load(exported[model_type], threads=1)
    questions = [q for rq in semeval[:3] for q in (rq.query, *rq.candidates)]
    encoded = served.encode(questions)
    np.testing.assert_allclose(encoded["neural"], scorer.vectors(questions), atol=1e-4, rtol=0)
    matrix = scorer.bow_matrix(questions)
    for i, (ids, weights) in enumerate(encoded["bow"]):
        row = matrix.getrow(i)
        np.testing.assert_array_equal(ids, row.indices[np.argsort(row.indices)])
        np.testing.assert_allclose(weights, row.toarray()[0][ids], atol=1e-9)
    first_ids = encoded["bow"][0][0][:3]
    assert served.terms(first_ids) == [featurizer.vocab.tokens[i] for i in first_ids]


def test_config_records_beta_weights_lengths_and_verification(checkpoints, exported):
    for model_type, directory in exported.items():
        model, featurizer, source = load_checkpoint(checkpoints[model_type])
        config = json.loads((directory / "config.json").read_text())
        assert config["model_type"] == model_type and config["similarity"] == model.similarity
        assert (config["max_title"], config["max_body"]) == (featurizer.max_title, featurizer.max_body)
        assert config["text"] == featurizer.preprocessor.options.model_dump(mode="json")
        fits = source["fusion"]["first_stages"]
        assert config["beta"]["fusion"] == {stage: fit["weights"] for stage, fit in fits.items()}
        calibration = {stage: fit["calibration"] for stage, fit in fits.items() if fit["calibration"]}
        if source["fusion"]["model_calibration"]:  # None where dev could not support a curve
            calibration["model"] = source["fusion"]["model_calibration"]
        assert config["beta"]["calibration"] == calibration
        assert set(config["versions"]) >= {"es_plugin_bridge", "torch", "onnx", "onnxruntime"}
        assert 0 <= config["verification"]["max_abs_diff"] <= 1e-4
        weights = np.load(directory / "bow_weights.npy", allow_pickle=False)
        if model_type == "bow-cnn":
            assert config["beta"]["model"] == pytest.approx(model.beta.detach().tolist())
            np.testing.assert_array_equal(weights, model.bow.weight.detach().numpy())
        else:
            assert config["beta"]["model"] is None
            np.testing.assert_array_equal(weights, featurizer.vocab.idf)
        manifest = json.loads((directory / "manifest.json").read_text())
        assert set(manifest["files"]) == {p.name for p in directory.iterdir()} - {"manifest.json"}
        for name, entry in manifest["files"].items():
            assert entry["sha256"] == hashlib.sha256((directory / name).read_bytes()).hexdigest()


def test_serving_needs_no_torch(exported, semeval):
    code = (
        "import sys\n"
        "from es_plugin_bridge.data.types import Question\n"
        "from es_plugin_bridge.serving import ModelDirectory\n"
        f"m = ModelDirectory.load({str(exported['bow-cnn'])!r}, threads=1)\n"
        "docs = [Question('a', 'wireless broken'), Question('b', 'x')]\n"
        "r = m.rerank(Question('q', 'wifi not working'), docs)\n"
        "assert len(r['model']) == 2\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def _flip_byte(directory: Path) -> str:
    path = directory / "encoder.onnx"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return "encoder.onnx"


def _delete(directory: Path) -> str:
    (directory / "vocab.json").unlink()
    return "vocab.json"


def _add(directory: Path) -> str:
    (directory / "notes.txt").write_text("extra")
    return "notes.txt"


def _edit_config(directory: Path) -> str:
    path = directory / "config.json"
    path.write_text(path.read_text().replace('"cosine"', '"manhattan"'))
    return "config.json"


@pytest.mark.parametrize("tamper", [_flip_byte, _delete, _add, _edit_config])
def test_changed_missing_or_extra_file_is_refused_by_name(tamper, exported, tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(exported["bow-cnn"], directory)
    ModelDirectory.load(directory, threads=1)  # intact copy loads
    name = tamper(directory)
    with pytest.raises(UserError, match=name.replace(".", r"\.")):
        ModelDirectory.load(directory, threads=1)


def test_missing_manifest_is_refused(exported, tmp_path):
    directory = tmp_path / "m"
    shutil.copytree(exported["gru"], directory)
    (directory / "manifest.json").unlink()
    with pytest.raises(UserError, match="manifest.json is missing"):
        ModelDirectory.load(directory)


def test_non_empty_out_needs_force(checkpoints, tmp_path, cli):
    out = tmp_path / "model"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    code, _, err = cli([str(checkpoints["gru"]), "--out", str(out), "--quiet"], export_main)
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in out.iterdir()] == ["stale.txt"]
    code, _, err = cli([str(checkpoints["gru"]), "--out", str(out), "--force", "--quiet"], export_main)
    assert code == 0, err
    assert not (out / "stale.txt").exists()
    assert ModelDirectory.load(out).model_type == "gru"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp or backup dirs left
    code, _, err = cli([str(checkpoints["gru"]), "--out", str(checkpoints["gru"]), "--force"], export_main)
    assert code == 2 and "would replace the checkpoint" in err
    assert (checkpoints["gru"] / "model.safetensors").is_file()


def _truncate_weights(ckpt: Path) -> str:
    path = ckpt / "model.safetensors"
    path.write_bytes(path.read_bytes()[:200])
    return "model.safetensors"


def _drop_vocab(ckpt: Path) -> str:
    (ckpt / "vocab.json").unlink()
    return "vocab.json"


def _drop_weights(ckpt: Path) -> str:
    (ckpt / "model.safetensors").unlink()
    return "model.safetensors"


def _not_a_checkpoint(ckpt: Path) -> str:
    for path in ckpt.iterdir():
        path.unlink()
    return "config.json"


@pytest.mark.parametrize("damage", [_truncate_weights, _drop_vocab, _drop_weights, _not_a_checkpoint])
def test_bad_checkpoint_gives_one_line_error_and_writes_nothing(damage, checkpoints, tmp_path, cli):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["gru"], ckpt)
    name = damage(ckpt)
    code, out, err = cli([str(ckpt), "--out", str(tmp_path / "model")], export_main)
    assert code == 2
    assert name in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_mismatch_beyond_tolerance_aborts_without_output(checkpoints, tmp_path, cli):
    argv = [str(checkpoints["gru"]), "--out", str(tmp_path / "m"), "--tolerance", "1e-12"]
    code, _, err = cli(argv, export_main)
    assert code == 2 and "does not match torch" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["export-onnx"], ["esrerank", "export-onnx"]])
def test_console_scripts(command, checkpoints, tmp_path):
    out = tmp_path / "model"
    argv = [str(BIN / command[0]), *command[1:], str(checkpoints["bow-cnn"]), "--out", str(out)]
    argv += ["--threads", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "exported bow-cnn" in done.stdout
    assert ModelDirectory.load(out).config.beta.model is not None


VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
EVALUATIONS = {
    "rerank": ["--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "given,model,fused"],
    "retrieval": ["--queries", f"pairs:{VAL}", "--max-queries", "80", "--rankers", "model,fused"],
    "classify": ["--data", f"pairs:{VAL}", "--dev", f"pairs:{VAL}", "--rankers", "model"],
}


@pytest.mark.parametrize("task", list(EVALUATIONS))
@pytest.mark.parametrize("model_type", list(TYPES))
def test_evaluate_an_exported_directory_as_its_checkpoint(task, model_type, checkpoints, exported, tmp_path,
                                                          cli):
    """``evaluate --model`` takes either format; the exported one scores through onnxruntime alike."""
    figures, rankings = {}, {}
    for form, directory in (("checkpoint", checkpoints[model_type]), ("exported", exported[model_type])):
        out = tmp_path / f"{form}.json"
        code, _, err = cli(["evaluate", "--task", task, *EVALUATIONS[task], "--model", str(directory),
                            "--json", str(out), "--no-progress"])
        assert code == 0, err
        figures[form] = json.loads(out.read_text())["rankers"]
        lines = (tmp_path / f"{form}.per_query.jsonl").read_text().splitlines()
        rankings[form] = [next(r[k] for k in ("ranking", "top_ids", "predicted") if k in r)
                          for r in map(json.loads, lines)]
    assert figures["exported"].keys() == figures["checkpoint"].keys()
    for ranker, metrics in figures["checkpoint"].items():
        assert figures["exported"][ranker] == pytest.approx(metrics, abs=0.01), ranker
    same = sum(a == b for a, b in zip(rankings["exported"], rankings["checkpoint"], strict=True))
    assert same >= 0.98 * len(rankings["checkpoint"])  # float32 onnx vs torch may swap a near-tie


def test_the_config_names_no_local_path(exported):
    """A model directory is shipped to the sidecar's host: its config.json (under the manifest's sha256)
    records the checkpoint by folder name and config digest, and no string in it is an absolute path."""
    config = json.loads((exported["bow-cnn"] / "config.json").read_text(encoding="utf-8"))

    def strings(node):
        if isinstance(node, dict):
            return [s for value in node.values() for s in strings(value)]
        if isinstance(node, list):
            return [s for value in node for s in strings(value)]
        return [node] if isinstance(node, str) else []

    assert [s for s in strings(config) if s.startswith("/") or Path(s).is_absolute()] == []
    source = config["source"]["checkpoint"]
    assert set(source) == {"name", "config_sha256"} and len(source["config_sha256"]) == 64
