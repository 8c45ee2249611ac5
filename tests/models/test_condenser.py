"""Condenser pretraining model: what the head reads, the shared projection, the two losses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoModel, BertConfig, BertTokenizerFast, DataCollatorForLanguageModeling

from models.condenser import CondenserConfig, CondenserForPretraining
from tests.tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def backbone_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert4"), layers=4)


def _batch(root: Path) -> dict[str, torch.Tensor]:
    tok = BertTokenizerFast.from_pretrained(root)
    texts = ["insulin lowers glucose in the blood", "graphene conducts heat and electricity well"]
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.3, seed=0)
    return collator([tok(t) for t in texts])


def test_head_reads_late_cls_and_early_tokens(backbone_dir: Path) -> None:
    model = CondenserForPretraining.from_backbone(backbone_dir, head_layers=2)
    assert model.config.resolved_early_layers == 2  # half of 4
    seen: list[torch.Tensor] = []
    model.head.register_forward_pre_hook(lambda _m, args, kwargs: seen.append(args[0]), with_kwargs=True)
    batch = _batch(backbone_dir)
    model.eval()
    model(**batch)
    states = model.backbone()(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
    ).hidden_states
    torch.testing.assert_close(seen[0][:, 0], states[-1][:, 0])  # late CLS
    torch.testing.assert_close(seen[0][:, 1:], states[2][:, 1:])  # early tokens (skip connection)


def test_backbone_weights_are_loaded_and_the_projection_is_shared(backbone_dir: Path) -> None:
    model = CondenserForPretraining.from_backbone(backbone_dir)
    ref = AutoModel.from_pretrained(backbone_dir)
    for name, value in model.backbone().state_dict().items():
        torch.testing.assert_close(value, ref.state_dict()[name])
    assert model.mlm.get_output_embeddings().weight is model.backbone().get_input_embeddings().weight
    out = model(**_batch(backbone_dir))
    torch.testing.assert_close(out.loss, out.head_mlm_loss + out.backbone_mlm_loss)
    out.loss.backward()
    assert model.head.layer[0].attention.self.query.weight.grad is not None  # the head trains
    assert model.backbone().encoder.layer[3].output.dense.weight.grad is not None  # late layers through CLS


def test_config_refuses_bad_splits(backbone_dir: Path) -> None:
    backbone = BertConfig(num_hidden_layers=4).to_dict()
    with pytest.raises(StrictDataclassError, match="early_layers"):
        CondenserConfig(backbone=backbone, early_layers=4)  # type: ignore[arg-type]
    with pytest.raises(StrictDataclassError, match="head_layers"):
        CondenserConfig(backbone=backbone, head_layers=0)  # type: ignore[arg-type]
