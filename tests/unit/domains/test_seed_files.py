"""Data-defined domains from seed files: every documented line error, the split rule, the three kinds scored by the
existing checkers, and ``genenv domains check``'s output and exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.contracts.tasks import RejectionReason, Seed
from genenv.domains.base import TaskRejected
from genenv.domains.data.domain import check_seed_file
from genenv.domains.data.seedfile import split_by_hash
from genenv.domains.function_calling.domain import gold_answer

TOOLS = [
    {"type": "function", "function": {"name": "convert_currency", "description": "Convert an amount",
     "parameters": {"type": "object", "properties": {
         "amount": {"type": "number", "exclusiveMinimum": 0},
         "source": {"type": "string", "pattern": "^[A-Z]{3}$"},
         "target": {"type": "string", "pattern": "^[A-Z]{3}$"},
         "round": {"type": "boolean", "default": False}},
         "required": ["amount", "source", "target"]}}},
    {"type": "function", "function": {"name": "stock_price", "description": "Latest price of a ticker",
     "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}, "required": ["ticker"]}}},
]


def _row(text: str, calls: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps({"tools": TOOLS, "messages": [{"role": "user", "content": text}], "calls": calls, **extra})


CONVERT = {"name": "convert_currency", "arguments": {"amount": 20, "source": "EUR", "target": "USD"}}


def test_each_kind_of_bad_row_gives_its_line_error() -> None:
    lines = [
        _row("Convert 20 EUR to USD", [CONVERT]),                                             # 1 ok
        '{"tools": [',                                                                        # 2 bad JSON
        json.dumps({"tools": TOOLS, "calls": []}),                                            # 3 missing messages
        _row("Price of AAPL", [{"name": "share_price", "arguments": {"ticker": "AAPL"}}]),    # 4 undeclared tool
        _row("Convert 5 usd", [{"name": "convert_currency",
                                "arguments": {"amount": 5, "source": "usd", "target": "EUR"}}]),  # 5 schema
        _row("Convert -5 EUR", [{"name": "convert_currency",
                                 "arguments": {"amount": -5, "source": "EUR", "target": "USD"}}]),  # 6 schema
        _row("Convert 20 EUR to USD", [CONVERT]),                                             # 7 duplicate of 1
        "[1, 2]",                                                                             # 8 not an object
        _row("Price of MSFT", [{"name": "stock_price", "arguments": {}}]),                    # 9 missing required
        _row("Price of IBM", [{"name": "stock_price", "arguments": {"ticker": "IBM"}}], split="test"),  # 10 split
    ]
    _, report = check_seed_file("fx", "function_calling", "\n".join(lines) + "\n\n")
    assert [str(e) for e in report.errors] == [
        "line 2: bad JSON: Expecting value at column 12",
        "line 3: missing field 'messages'",
        "line 4: calls[0] names 'share_price', which is not a declared tool (declared: ['convert_currency', "
        "'stock_price'])",
        "line 5: calls[0] (convert_currency): arguments violate the tool's schema at source: 'usd' does not match "
        "'^[A-Z]{3}$'",
        "line 6: calls[0] (convert_currency): arguments violate the tool's schema at amount: -5 is less than or "
        "equal to the minimum of 0",
        "line 7: duplicate of line 1",
        "line 8: a row must be a JSON object",
        "line 9: calls[0] (stock_price): arguments violate the tool's schema: 'ticker' is a required property",
        "line 10: split must be 'train' or 'eval', got 'test'",
    ]
    assert (report.rows, report.error_count, report.ok) == (10, 9, False)


def test_file_level_errors() -> None:
    assert [str(e) for e in check_seed_file("x", "qa", "\n \n")[1].errors] == ["file: empty file: no seed rows"]
    big = check_seed_file("x", "qa", '{"question": "q?", "answers": ["a"]}\n' * 100, max_bytes=500)[1]
    assert [str(e) for e in big.errors] == [
        "file: over the size limit: 3700 bytes > 500 (split the file or raise GENENV_DOMAINS__MAX_SEED_FILE_BYTES)"]
    only_eval = check_seed_file("x", "qa", '{"question": "Who?", "answers": ["me"], "split": "eval"}\n')[1]
    assert [str(e) for e in only_eval.errors] == [
        "file: no train rows: every row is held out for evaluation, so the simulator has no seeds"]
    with pytest.raises(ValueError, match="unknown kind 'tools'"):
        check_seed_file("x", "tools", "{}")
    assert next(str(e) for e in check_seed_file("x", "qa", b"\xff\xfe")[1].errors).startswith("file: not UTF-8")


def test_function_calling_seeds_are_bfcl_tasks_scored_by_the_bfcl_checker() -> None:
    rows = [_row(f"Convert {n} EUR to USD", [{"name": "convert_currency",
                                             "arguments": {"amount": n, "source": "EUR", "target": "USD"}}])
            for n in range(1, 11)]
    rows.append(_row("Tell me a joke", [], split="train"))
    rows.append(_row("Price of AAPL and MSFT", [{"name": "stock_price", "arguments": {"ticker": "AAPL"}},
                                                {"name": "stock_price", "arguments": {"ticker": "MSFT"}}]))
    domain, report = check_seed_file("fx", "function_calling", "\n".join(rows))
    assert report.ok and len(report.train) + len(report.eval) == 12
    every = {s.id: s for s in [*report.train, *report.eval]}
    # the held-out fifth is the hash rule's, reproducible from the canonical task alone
    assert {s.id for s in report.eval} == {
        sid for sid, s in every.items() if split_by_hash(domain.canonical_task(s.payload)) == "eval"} - {"fx-11"}
    one = every["fx-3"].payload
    assert one["category"] == "multiple" and one["data_kind"] == "function_calling"
    assert one["ground_truth"] == [{"convert_currency": {"amount": [3], "source": ["EUR"], "target": ["USD"],
                                                         "round": [False, ""]}}]
    assert domain.verify(one, "[convert_currency(amount=3, source='EUR', target='USD')]").success
    assert domain.verify(one, "[convert_currency(amount=3.0, source='EUR', target='USD', round=False)]").success
    assert not domain.verify(one, "[convert_currency(amount=4, source='EUR', target='USD')]").success
    assert every["fx-11"].payload["category"] == "irrelevance"
    assert domain.verify(every["fx-11"].payload, "I cannot help with that.").success
    parallel = every["fx-12"].payload
    assert parallel["category"] == "parallel_multiple"
    assert domain.verify(parallel, "[stock_price(ticker='MSFT'), stock_price(ticker='AAPL')]").success
    assert domain.verify(parallel, gold_answer(parallel)).success
    # the simulator's variations go through BFCL's validation, tagged with the kind, never the seed again
    seed = Seed(id="fx-3", domain="fx", payload=one)
    variation = {"question": "Convert 7 GBP to JPY", "functions": one["functions"],
                 "ground_truth": [{"convert_currency": {"amount": [7], "source": ["GBP"], "target": ["JPY"]}}]}
    assert domain.validate_generation(variation, seed)["data_kind"] == "function_calling"
    same = {**variation, "question": "Convert 3 EUR to USD", "ground_truth": one["ground_truth"]}
    with pytest.raises(TaskRejected) as rejected:
        domain.validate_generation(same, seed)
    assert rejected.value.reason is RejectionReason.DUPLICATE


def test_bfcl_format_rows_are_accepted() -> None:
    row = {"id": "simple_1", "question": [[{"role": "user", "content": "Area of a circle of radius 3?"}]],
           "function": [{"name": "circle_area", "description": "Area", "parameters": {
               "type": "dict", "properties": {"radius": {"type": "integer", "description": "r"}},
               "required": ["radius"]}}],
           "ground_truth": [{"circle_area": {"radius": [3]}}]}
    bad = {**row, "ground_truth": [{"square_area": {"side": [3]}}]}
    domain, report = check_seed_file("geo", "function_calling", json.dumps(row) + "\n" + json.dumps(bad))
    assert [str(e) for e in report.errors] == [
        "line 2: ground_truth[0] names 'square_area', which is not a declared function"]
    (seed,) = [*report.train, *report.eval]
    assert domain.verify(seed.payload, "[circle_area(radius=3)]").success


@pytest.mark.parametrize(("normalize", "answer", "reply", "success"), [
    ("number", "1234.5", "It is 1,234.50 dollars", True),
    ("number", "42", "41", False),
    ("case-insensitive", "The Nile", "nile", True),
    ("exact", "The Nile", "the nile", False),
    ("exact", "The Nile", "Answer: The Nile", True),
])
def test_exact_answer_normalisations(normalize: str, answer: str, reply: str, success: bool) -> None:
    content = json.dumps({"question": "What is it?", "answer": answer, "split": "train"})
    domain, report = check_seed_file("quiz", "exact_answer", content, {"normalize": normalize})
    assert report.ok
    assert domain.verify(report.train[0].payload, reply).success is success


def test_exact_answer_number_rows_must_be_numbers_and_qa_uses_token_f1() -> None:
    report = check_seed_file("quiz", "exact_answer", '{"question": "How many?", "answer": "many"}',
                             {"normalize": "number"})[1]
    assert [str(e) for e in report.errors] == [
        "line 1: answer 'many' is not a number (the domain normalises answers as numbers)"]
    domain, report = check_seed_file(
        "trivia", "qa", '{"question": "Who wrote Hamlet?", "answers": ["William Shakespeare"], "split": "train"}\n'
        '{"question": "Who?", "answers": []}')
    assert [str(e) for e in report.errors] == [
        "line 2: field 'answers' must be a non-empty list of non-empty strings"]
    verdict = domain.verify(report.train[0].payload, "Shakespeare")
    assert verdict.score == pytest.approx(2 / 3) and verdict.success  # Bamboogle's F1 and 0.5 threshold


def test_domains_check_command(tmp_path: Path) -> None:
    good = tmp_path / "fx.jsonl"
    good.write_text("\n".join(_row(f"Convert {n} EUR to USD", [{"name": "convert_currency", "arguments": {
        "amount": n, "source": "EUR", "target": "USD"}}]) for n in range(1, 6)) + "\n")
    result = CliRunner().invoke(app, ["domains", "check", str(good), "--kind", "function_calling"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("fx.jsonl: 5 rows: 5 train, 0 eval; 0 bad rows")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q?"}\n{oops\n')
    result = CliRunner().invoke(app, ["domains", "check", str(bad), "--kind", "qa"])
    assert result.exit_code == 1
    assert result.output.splitlines()[:2] == [
        "line 1: missing field 'answers'", "line 2: bad JSON: Expecting property name enclosed in double quotes at "
        "column 2"]
    result = CliRunner().invoke(app, ["domains", "check", str(bad), "--kind", "qa", "--normalize", "number"])
    assert result.exit_code == 2
