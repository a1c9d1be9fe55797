"""Numbers, dates and Arabic orthography, each normalised to one form."""

from __future__ import annotations

import pytest

from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.text.arabic import normalize_arabic

DATES = Preprocessor(TextOptions(dates=True))
NUMBERS = Preprocessor(TextOptions(numbers=True))
BOTH = Preprocessor(TextOptions(dates=True, numbers=True))


@pytest.mark.parametrize(
    "date",
    ["2015-03-12", "2015/3/12", "12/03/2015", "3/12/15", "12-03-2015", "12.03.2015", "12 March 2015",
     "12th of March, 2015", "12 Mar", "March 12", "march 12th, 2015", "Sept. 3", "March 2015", "May 2014",
     "3 May", "1st January 1999"],
)
def test_each_date_form_is_one_token(date: str) -> None:
    tokens = DATES.text_tokens(f"released on {date} for everyone")
    assert tokens == ["released", "on", "__date__", "for", "everyone"]


@pytest.mark.parametrize(
    "not_a_date",
    ["version 4 may fail", "kernel 2.6.32", "ubuntu 10.04.4", "12.04", "a 32/64 bit", "market 12", "march on",
     "13/13/2015", "2015-13-01"],
)
def test_look_alikes_are_not_dates(not_a_date: str) -> None:
    assert "__date__" not in DATES.text_tokens(not_a_date)


def test_real_titles_with_dates() -> None:
    # Titles of the shipped train_titles.tsv.
    assert DATES.text_tokens("Tar extract error - implausibly old time stamp 1970-01-01 01:00:00") == [
        "tar", "extract", "error", "implausibly", "old", "time", "stamp", "__date__", "01", "00", "00"]
    assert DATES.text_tokens("Ubuntu 12.04, October 2012 update, black login screen") == [
        "ubuntu", "12.04", "__date__", "update", "black", "login", "screen"]


@pytest.mark.parametrize(("text", "tokens"), [
    ("install 12.04 on 2 disks", ["install", "__num__", "on", "__num__", "disks"]),
    ("1,000 users and 3.5 GB", ["__num__", "users", "and", "__num__", "gb"]),
    ("x86_64 i386 800x600 2nd mp3", ["x86_64", "i386", "800x600", "2nd", "mp3"]),
    ("kernel 2.6.32-38", ["kernel", "2.6.32-38"]),
    ("\u0661\u0662\u0663 arabic-indic", ["__num__", "arabic-indic"]),
])
def test_numbers_are_whole_number_tokens(text: str, tokens: list[str]) -> None:
    assert NUMBERS.text_tokens(text) == tokens


def test_dates_win_over_numbers_and_both_are_off_by_default() -> None:
    text = "Since 12 March 2015 I have 3 errors"
    assert BOTH.text_tokens(text) == ["since", "__date__", "i", "have", "__num__", "errors"]
    assert Preprocessor(TextOptions()).text_tokens(text) == ["since", "12", "march", "2015", "i", "have", "3",
                                                             "errors"]


@pytest.mark.parametrize(("raw", "normal"), [
    ("أَحْمَد", "احمد"),  # harakat removed, hamza-on-alef unified
    ("مـــدرسة", "مدرسه"),  # tatweel removed, teh marbuta to heh
    ("إلى", "الي"),  # alef with hamza below, alef maqsura
    ("آمن", "امن"),  # alef with madda
    ("مستشفى", "مستشفي"),  # alef maqsura to yeh
    ("كتابٌ", "كتاب"),  # tanwin
    ("Ubuntu 12.04", "Ubuntu 12.04"),
])
def test_arabic_orthographic_normalisation(raw: str, normal: str) -> None:
    assert normalize_arabic(raw) == normal


def test_arabic_variants_become_one_token_only_with_the_option() -> None:
    variants = ["مَدْرَسَة", "مدرسة", "مـدرسه"]
    arabic = Preprocessor(TextOptions(arabic=True))
    assert len({tuple(arabic.text_tokens(v)) for v in variants}) == 1
    assert len(arabic.text_tokens(variants[0])) == 1
    assert len({tuple(Preprocessor(TextOptions()).text_tokens(v)) for v in variants}) == 3
