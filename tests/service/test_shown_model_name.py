"""The name GET /collections shows for a generation's model (service/model_registry.py `shown_model_name`): the
registered name it was reindexed with only while that name reaches the folder the generation serves from. And the
name a search's rerank shows for the server's default reranker (`public_model_name`), never its folder."""

from __future__ import annotations

from pathlib import Path

from models.loading import packaged_minilm_dir
from models.registry import ModelRegistry
from service.model_registry import public_model_name, shown_model_name
from service.settings import Settings
from tests.reranker_fixtures import make_reranker
from tests.tiny_models import save_tiny_bert


def test_a_builtin_alias_shows_as_default() -> None:
    settings = Settings()
    stored = str(packaged_minilm_dir())
    assert shown_model_name(settings=settings, stored=stored, recorded="minilm") == "default"
    assert shown_model_name(settings=settings, stored=stored, recorded=None) == "default"


def test_a_recorded_name_counts_only_while_it_reaches_the_same_folder(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    registry = ModelRegistry(tmp_path / "models")
    registry.register("first", save_tiny_bert(tmp_path / "a"))
    stored = str(registry.model_dir("first"))
    assert shown_model_name(settings=settings, stored=stored, recorded="first") == "first"
    # The name of another model (registered since under the recorded name's place, or simply another one).
    registry.register("second", save_tiny_bert(tmp_path / "b"))
    assert shown_model_name(settings=settings, stored=stored, recorded="second") == "first"
    registry.remove("first")
    assert shown_model_name(settings=settings, stored=stored, recorded="first") == "unregistered"
    registry.register("first", save_tiny_bert(tmp_path / "c"))  # the name again, for other weights
    assert shown_model_name(settings=settings, stored=str(tmp_path / "a"), recorded="first") == "unregistered"


def test_the_default_reranker_is_shown_by_its_registry_name_or_as_unregistered(tmp_path: Path) -> None:
    # VELA_RERANKER=/some/dir/rr1 was shown as "/some/dir/rr1" in every search response that used it; the search
    # route shows it as public_model_name says.
    settings = Settings(data_dir=tmp_path / "data", models_dir=tmp_path / "models")
    outside = make_reranker("bert", tmp_path / "some" / "dir" / "rr1")
    assert public_model_name(settings=settings, stored=str(outside)) == "unregistered"
    registry = ModelRegistry(tmp_path / "models")
    registry.register("rr1", outside)
    assert public_model_name(settings=settings, stored=str(registry.model_dir("rr1"))) == "rr1"
    assert public_model_name(settings=settings, stored=str(outside)) == "unregistered"  # the copy is registered
