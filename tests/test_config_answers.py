"""Config-test answers kept on disk: found by a later process under the same key and code,
never under another, a bad file ignored, the oldest dropped past the cap."""

from __future__ import annotations

import json

from fixos.records import config_answers
from fixos.records.config_answers import ConfigAnswers

KEY = "mariadbd /var/lib/docker/overlay2/abc/diff:/var/lib/docker/overlay2/def/diff 00ff"


def test_an_answer_is_found_by_a_later_process(tmp_path):
    first = ConfigAnswers(tmp_path)
    first[KEY] = ""
    first["php-fpm8.2 layers 11"] = "ERROR: bogus line"
    later = ConfigAnswers(tmp_path)  # a later run's judge: nothing in memory
    assert len(later) == 0 and KEY in later and later[KEY] == ""
    assert later["php-fpm8.2 layers 11"] == "ERROR: bogus line"
    assert "php-fpm8.2 layers 12" not in later and later.get("php-fpm8.2 layers 12") is None
    assert list(later) == [KEY, "php-fpm8.2 layers 11"]  # what it asked for, now in memory


def test_changed_code_finds_nothing(tmp_path, monkeypatch):
    ConfigAnswers(tmp_path)[KEY] = ""
    monkeypatch.setattr(config_answers, "code_digest", lambda: "another verifier")
    assert KEY not in ConfigAnswers(tmp_path)


def test_a_file_that_does_not_read_is_ignored_and_written_again(tmp_path):
    answers = ConfigAnswers(tmp_path)
    answers[KEY] = ""
    (path,) = tmp_path.glob("*.json")
    path.write_text("{not json")
    assert KEY not in ConfigAnswers(tmp_path)
    path.write_text(json.dumps({"key": "another key", "answer": ""}))  # a digest's collision
    assert KEY not in ConfigAnswers(tmp_path)
    path.unlink()
    ConfigAnswers(tmp_path)[KEY] = "fails"
    assert ConfigAnswers(tmp_path)[KEY] == "fails"


def test_forgetting_trims_memory_only_and_the_disk_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(config_answers, "KEPT_FILES", 3)
    answers = ConfigAnswers(tmp_path)
    for n in range(5):
        answers[f"{KEY} {n}"] = str(n)
    assert len(list(tmp_path.glob("*.json"))) == 3
    assert f"{KEY} 4" in ConfigAnswers(tmp_path)
    answers.pop(f"{KEY} 4")  # as the judge trims what it holds
    assert f"{KEY} 4" not in list(answers) and answers[f"{KEY} 4"] == "4"  # read again from disk


def test_an_unwritable_directory_costs_only_time(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    answers = ConfigAnswers(blocked / "below")  # its parent is a file: nothing can be written
    answers[KEY] = ""
    assert answers[KEY] == "" and KEY not in ConfigAnswers(blocked / "below")
