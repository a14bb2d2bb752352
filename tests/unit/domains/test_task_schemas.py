"""Every domain's task schema compiles in xgrammar, the one grammar backend of our vLLM servers and of the local
backend (a vLLM engine keeps the backend of its first guided request, so a schema that needs another one fails
there), and the grammar admits the tasks the domain's validator accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from genenv.domains import REGISTRY, domain_names
from genenv.domains.function_calling.domain import MAX_NAME_CHARS
from genenv.inference.launcher import STRUCTURED_OUTPUTS_BACKEND

xgr = pytest.importorskip("xgrammar")

EXACT = json.dumps({"question": "What is 2 + 2?", "answer": "4"}) + "\n"


@pytest.fixture(scope="module")
def compiler(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(AutoTokenizer.from_pretrained(str(model_dir))))


def _schemas() -> dict[str, dict[str, Any]]:
    out = {name: REGISTRY.get(name).task_json_schema() for name in domain_names()}
    out["data:exact_answer"] = REGISTRY.data_domain("schema_sums", "exact_answer", EXACT).task_json_schema()
    return out


def test_the_servers_backend_is_the_one_these_schemas_are_checked_in() -> None:
    assert STRUCTURED_OUTPUTS_BACKEND == "xgrammar"


@pytest.mark.parametrize("name", sorted(_schemas()))
def test_the_schema_compiles_in_xgrammar_and_vllm_would_not_refuse_it(name: str, compiler: Any) -> None:
    schema = _schemas()[name]
    compiler.compile_json_schema(json.dumps(schema))  # raises on a schema xgrammar cannot express
    vllm_check = pytest.importorskip("vllm.v1.structured_output.backend_xgrammar")
    assert not vllm_check.has_xgrammar_unsupported_json_features(schema)


def test_a_function_calling_task_with_nested_allowed_values_is_admitted(compiler: Any) -> None:
    """BFCL's allowed values are any JSON (lists, dicts of lists): an array without "items" admits nothing in
    xgrammar's strict mode, which is what the schema got wrong before."""
    domain = REGISTRY.get("function_calling")
    task = {
        "question": "Sum the list and label it",
        "functions": [{"name": "math.total", "description": "Sum numbers", "parameters": {
            "type": "dict", "properties": {
                "values": {"type": "array", "description": "numbers", "items": {"type": "integer"}},
                "meta": {"type": "dict", "description": "labels"}},
            "required": ["values"]}}],
        "ground_truth": [{"math.total": {"values": [[1, 2, 3]], "meta": [{"label": ["sum"]}, ""]}}],
    }
    domain.validate_generation(task, None)  # the domain accepts it ...
    grammar = compiler.compile_json_schema(json.dumps(domain.task_json_schema()), any_whitespace=False)
    matcher = xgr.GrammarMatcher(grammar)
    assert matcher.accept_string(json.dumps(task))  # ... and so does the grammar
    assert matcher.is_completed()


def test_a_long_function_name_is_rejected_by_the_validator_now_that_the_schema_cannot_bound_it() -> None:
    from genenv.contracts.tasks import RejectionReason
    from genenv.domains.base import TaskRejected

    name = "f" * (MAX_NAME_CHARS + 1)
    task = {"question": "q", "functions": [{"name": name, "description": "d", "parameters": {
        "type": "dict", "properties": {}, "required": []}}], "ground_truth": [{name: {}}]}
    with pytest.raises(TaskRejected) as caught:
        REGISTRY.get("function_calling").validate_generation(task, None)
    assert caught.value.reason is RejectionReason.TOO_LONG
