"""API-Bank calls: parsing, API-Bank's per-API rules, and every gold call of level-1/2/3 scoring 1."""

from __future__ import annotations

from typing import Any

import pytest

from genenv.checkers.base import CheckFailure, run_checker
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.api_bank.checker import ApiCall, GoldCall, check_api_bank, judge_call, parse_api_request
from genenv.domains.api_bank.domain import DOMAIN, load_level, load_level3_seeds
from tests.benchdata import BenchData, on_subset_and_full


@on_subset_and_full("api_bank")
@pytest.mark.parametrize("level", ["level-1", "level-2"])
def test_every_gold_call_scores_one(data: BenchData, level: str) -> None:
    items = load_level(data.root, level)
    assert len(items) == ({"level-1": 399, "level-2": 135} if data.full else {"level-1": 12, "level-2": 8})[level]
    for item in items:
        v = DOMAIN.verify(item, item["expected_output"])
        assert v.valid and v.score == 1.0, (item["source"], v)


@on_subset_and_full("api_bank")
def test_every_level3_seed_gold_scores_one(data: BenchData) -> None:
    seeds = load_level3_seeds(data.root)
    assert len(seeds) == (245 if data.full else 12)
    assert all(DOMAIN.verify(s, s["expected_output"]).score == 1.0 for s in seeds)


def test_parse_reads_literals_bare_words_and_quoted_lists() -> None:
    call = parse_api_request(
        "API-Request: [AddMeeting(token='t1', attendees='['John', 'Mary']', room_count=2, on=True, mode=fast)] trailing"
    )
    assert call == ApiCall(
        "AddMeeting", {"token": "t1", "attendees": ["John", "Mary"], "room_count": 2, "on": True, "mode": "fast"}
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I cannot help with that.", VerdictErrorKind.PARSE_ERROR),
        ("[GetUserToken(username='a', password=)]", VerdictErrorKind.PARSE_ERROR),
        ("[GetUserToken(username='a'", VerdictErrorKind.PARSE_ERROR),
        ("[GetUserToken('a', 'b')]", VerdictErrorKind.SCHEMA_ERROR),
        ("[GetUserToken(username=__import__('os').system('x'))]", VerdictErrorKind.SCHEMA_ERROR),
        ("[GetUserToken(username='a', username='b')]", VerdictErrorKind.SCHEMA_ERROR),
        ("[GetUserToken(username='" + "a" * 40_000 + "')]", VerdictErrorKind.TOO_LARGE),
    ],
)
def test_malformed_requests_are_wrong_answers_scored_zero(text: str, kind: VerdictErrorKind) -> None:
    gold = {
        "api_name": "GetUserToken",
        "arguments": {"username": "a", "password": "b"},
        "parameters": {"username": "str", "password": "str"},
    }
    v = run_checker(lambda: check_api_bank(text, gold, 1.0))
    if kind is VerdictErrorKind.TOO_LARGE:  # too large to check is not the agent's wrong answer: invalid
        assert not v.valid and v.score is None and v.error is not None and v.error.kind is kind
    else:  # METHOD.md Eq. 1: a reply that does not parse is a wrong answer, scored 0
        assert v.valid and v.score == 0.0 and not v.success and v.form_error is not None and v.form_error.kind is kind


def _judge(name: str, pred: dict[str, Any], gold: dict[str, Any], params: dict[str, str], **result: Any) -> str:
    judgement = judge_call(ApiCall(name, pred), GoldCall(name=name, args=gold, parameters=params, **result))
    return judgement.reason


TOKEN = {"token": "str", "content": "str", "time": "str", "location": "str"}


def test_default_rule_is_exact_and_checks_name_params_and_types() -> None:
    params = {"username": "str", "password": "str"}
    gold = {"username": "foo", "password": "bar"}
    assert _judge("GetUserToken", dict(gold), gold, params) == "correct"
    assert _judge("GetUserToken", {"username": "Foo", "password": "bar"}, gold, params) == "input_mismatch"
    assert _judge("GetUserToken", {"username": "foo"}, gold, params) == "missing_argument"
    assert _judge("GetUserToken", {**gold, "email": "x"}, gold, params) == "invalid_parameter_name"
    assert (
        judge_call(ApiCall("RegisterUser", gold), GoldCall("GetUserToken", gold, params)).reason == "api_name_mismatch"
    )
    hotel = {
        "hotel_name": "str",
        "check_in_time": "str",
        "check_out_time": "str",
        "room_count": "int",
        "adult_count": "int",
        "child_count": "int",
    }
    booking = {
        "hotel_name": "H",
        "check_in_time": "2023-01-01",
        "check_out_time": "2023-01-02",
        "room_count": 1,
        "adult_count": 2,
        "child_count": 0,
    }
    assert _judge("BookHotel", {**booking, "room_count": "1"}, booking, hotel) == "correct"  # '1'.isdigit()
    assert _judge("BookHotel", {**booking, "room_count": "one"}, booking, hotel) == "invalid_parameter_type"


def test_free_text_fields_pass_on_word_jaccard_above_half() -> None:
    gold = {
        "token": "t",
        "content": "Meeting with the marketing team",
        "time": "2021-09-28 14:00:00",
        "location": "Conference room",
    }
    # 4 shared of 6 distinct words → 0.67 > 0.5
    close = {**gold, "content": "Meeting with the marketing"}
    assert _judge("AddAgenda", close, gold, TOKEN, output="success") == "correct"
    far = {**gold, "content": "Marketing sync"}
    assert _judge("AddAgenda", far, gold, TOKEN, output="success") == "input_mismatch"
    # AddAgenda compares case-sensitively, reminders lower-case first
    upper = {**gold, "content": "MEETING WITH THE MARKETING TEAM"}
    assert _judge("AddAgenda", upper, gold, TOKEN) == "input_mismatch"
    rem = {"token": "str", "content": "str", "time": "str"}
    g = {"token": "t", "content": "Call mom", "time": "2023-01-01 10:00:00"}
    assert _judge("AddReminder", {**g, "content": "CALL MOM"}, g, rem) == "correct"


def test_normalising_rules_for_dates_ids_and_names() -> None:
    stock = {"stock_code": "str", "date": "str"}
    assert (
        _judge(
            "QueryStock",
            {"stock_code": " aapl ", "date": "2022-03-12"},
            {"stock_code": "AAPL", "date": "2022-03-12"},
            stock,
        )
        == "correct"
    )
    assert (
        _judge(
            "QueryStock",
            {"stock_code": "AAPL", "date": "2022-3-12"},
            {"stock_code": "AAPL", "date": "2022-03-12"},
            stock,
        )
        == "correct"
    )
    assert (
        _judge(
            "QueryStock",
            {"stock_code": "AAPL", "date": "12/03/2022"},
            {"stock_code": "AAPL", "date": "2022-03-12"},
            stock,
        )
        == "input_mismatch"
    )
    assert _judge("QueryHistoryToday", {"date": "2023-10-06"}, {"date": "10-06"}, {"date": "str"}) == "correct"
    assert _judge("Calculator", {"formula": "(1+2)*3"}, {"formula": "(1 + 2) * 3"}, {"formula": "str"}) == "correct"
    assert (
        _judge("Calculator", {"formula": "3*(1+2)"}, {"formula": "(1 + 2) * 3"}, {"formula": "str"}) == "input_mismatch"
    )
    scene = {"name": "str", "devices": "list"}
    devices = [{"name": "Light", "description": "kitchen light "}, {"name": "oven", "description": "oven"}]
    assert (
        _judge(
            "AddScene",
            {"name": " Cooking", "devices": list(reversed(devices))},
            {"name": "cooking", "devices": devices},
            scene,
        )
        == "correct"
    )
    assert (
        _judge("PlayMusic", {"music_name": " Yesterday "}, {"music_name": "yesterday"}, {"music_name": "str"})
        == "correct"
    )


def test_delete_rules_compare_time_only_when_the_gold_call_succeeded() -> None:
    gold = {"token": "t", "content": "Team sync", "time": "2023-01-01 10:00:00", "location": "Room 1"}
    pred = {**gold, "content": "something else", "location": "elsewhere"}
    assert _judge("DeleteAgenda", pred, gold, TOKEN, output="success") == "correct"
    assert (
        _judge("DeleteAgenda", {**pred, "time": "2023-01-01 11:00:00"}, gold, TOKEN, output="success")
        == "input_mismatch"
    )
    assert _judge("DeleteAgenda", pred, gold, TOKEN, output=None, exception="no agenda") == "input_mismatch"


def test_proxies_for_apis_that_cannot_run_offline() -> None:
    assert _judge("GetToday", {"anything": "x"}, {}, {}) == "correct"
    ts = {"keywords": "str"}
    assert (
        _judge("ToolSearcher", {"keywords": "History october 6th"}, {"keywords": "history October 6th"}, ts)
        == "correct"
    )
    assert _judge("ToolSearcher", {"keywords": "weather"}, {"keywords": "history October 6th"}, ts) == "input_mismatch"
    assert (
        _judge("Wiki", {"keyword": "Albert_Einstein"}, {"keyword": "albert einstein"}, {"keyword": "str"}) == "correct"
    )


def test_timed_switch_device_id_alias() -> None:
    params = {"name": "str", "time": "str", "on": "bool"}
    gold = {"device_id": "123", "time": "2022-03-01 22:00:00", "on": False}
    assert (
        _judge("TimedSwitch", {"name": "123", "time": "2022-03-01 22:00:00", "on": "False"}, gold, params) == "correct"
    )
    assert (
        _judge("TimedSwitch", {"name": "123", "time": "2022-03-01 22:00:00", "on": True}, gold, params)
        == "input_mismatch"
    )


def test_gold_payload_errors_are_task_errors() -> None:
    v = DOMAIN.verify({"gold": {}}, "[GetToday()]")
    assert not v.valid and v.error is not None and v.error.kind is VerdictErrorKind.TASK_ERROR
    with pytest.raises(CheckFailure):
        GoldCall.from_payload({"api_name": 3, "arguments": {}})


@pytest.mark.parametrize(
    "text",
    ["[a(" * 10_000, "[a(" * 5_000 + ")" * 10_000, "[A(" + "a='[" * 7_000 + ")]", "x\n[A(b=1)] [C(d=2)] tail)]"],
)
def test_adversarial_replies_are_parsed_in_linear_time(text: str) -> None:
    # Upstream's regexes are quadratic on these; a slow parse would surface here as a timeout verdict.
    gold = {"api_name": "A", "arguments": {"b": 1}, "parameters": {"b": "int"}}
    v = run_checker(lambda: check_api_bank(text, gold, 1.0))
    assert v.valid and v.error is None
    if v.form_error is None:
        assert v.score == 1.0  # two calls on one line: the first one is judged
