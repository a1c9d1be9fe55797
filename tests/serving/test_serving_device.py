"""``--device auto|cpu|cuda`` (``serving.device``): the choice from onnxruntime's provider lists, tested
with the lists a CPU wheel, a GPU wheel with a device and a GPU wheel without one give; the provider that
really scores is in ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import onnxruntime as ort
import pytest

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.device import CPU, CUDA, check_active, requested_providers

CPU_WHEEL = ["AzureExecutionProvider", CPU]  # what `onnxruntime` lists
GPU_WHEEL = ["TensorrtExecutionProvider", CUDA, CPU]  # what `onnxruntime-gpu` lists, device or not


@pytest.mark.parametrize(("device", "available", "requested"), [
    ("auto", CPU_WHEEL, [CPU]),
    ("auto", GPU_WHEEL, [CUDA, CPU]),
    ("cpu", GPU_WHEEL, [CPU]),  # a GPU machine can still be told to score on the CPU
    ("cpu", CPU_WHEEL, [CPU]),
    ("cuda", GPU_WHEEL, [CUDA, CPU]),
])
def test_requested_providers(device, available, requested):
    assert requested_providers(device, available) == requested


def test_cuda_without_the_gpu_wheel_is_refused_naming_the_package():
    with pytest.raises(UserError, match="install onnxruntime-gpu"):
        requested_providers("cuda", CPU_WHEEL)
    with pytest.raises(UserError, match="device must be one of"):
        requested_providers("gpu", CPU_WHEEL)  # type: ignore[arg-type]


@pytest.mark.parametrize(("device", "requested", "active", "provider", "note"), [
    ("auto", [CUDA, CPU], [CUDA, CPU], CUDA, None),  # a device: CUDA scores
    ("auto", [CUDA, CPU], [CPU], CPU, "no CUDA device is usable"),  # GPU wheel, no device: one line
    ("auto", [CPU], [CPU], CPU, None),  # the CPU wheel: CPU is the choice, nothing to say
    ("cpu", [CPU], [CPU], CPU, None),
    ("cuda", [CUDA, CPU], [CUDA, CPU], CUDA, None),
])
def test_check_active(device, requested, active, provider, note):
    got, said = check_active(device, requested, active)
    assert got == provider
    assert (said is None) if note is None else (note in said)


def test_cuda_asked_for_but_not_usable_refuses_to_start():
    with pytest.raises(UserError, match="could not use a CUDA device"):
        check_active("cuda", [CUDA, CPU], [CPU])


def test_this_machine_scores_on_what_onnxruntime_offers_and_says_so(exported, cli):
    has_cuda = CUDA in ort.get_available_providers()
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, device="auto")
    assert model.provider in (CUDA, CPU) and (has_cuda or model.provider == CPU)
    assert ModelDirectory.load(exported["bow-cnn"], threads=1, device="cpu").provider == CPU
    client = create_app(model).test_client()
    assert client.get("/readyz").json["provider"] == model.provider
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f'provider="{model.provider}"' in metrics
    if not has_cuda:  # the CPU wheel (this project's CI): --device cuda is one line, before serving
        code, _, err = cli(["serve", str(exported["bow-cnn"]), "--device", "cuda"])
        assert code == 2 and "install onnxruntime-gpu" in err and len(err.strip().splitlines()) == 1
