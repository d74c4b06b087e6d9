"""One row per bad policy: the code, line and column of the diagnostic it must get.

Most rows add a few lines to a minimal valid policy (`wrap`), whose eight
skeleton lines are fixed, so the first added line is always line 9; the
columns are counted in the row's own text. A row with a blocker must have no
candidate; a warnings-only row must still have one.
"""

from __future__ import annotations

import re

import pytest

from pactwright.codes import CODES
from pactwright.compiler.pipeline import MAX_POLICY_BYTES, CheckResult, check_bytes
from pactwright.diagnostics import Severity

SKELETON = (
    'pact "t" version "1.0.0"',  # 1
    "currency EUR scale 2",  # 2
    "role a",  # 3
    'account x "x" external',  # 4
    'account y "y"',  # 5
    "state s initial",  # 6
    "state e final",  # 7
    "transition go: s -> e { by a }",  # 8
)
FIRST = len(SKELETON) + 1  # the line of the first line a row adds


def wrap(*lines: str) -> str:
    """The skeleton policy with `lines` appended, starting at line 9."""
    return "\n".join((*SKELETON, *lines)) + "\n"


def tr(*fields: str, head: str = "transition t2: s -> e {") -> tuple[str, ...]:
    """A multi-line transition: the head on one line, each field on its own, indented by 2."""
    return (head, *(f"  {f}" for f in fields), "}")


def split(*portions: str, amount: str = "1.00") -> tuple[str, ...]:
    """A transition (head at line 9) whose split's portions start on line 12, indented by 4."""
    return (
        "transition t2: s -> e {",
        "  by a",
        f"  transfer {amount} from x {{",
        *(f"    {p}" for p in portions),
        "  }",
        "}",
    )


EFFECTS = ("default deny", "rule R1 allow")  # lines 9 and 10 of the rows that declare effects

ROWS = [
    # --- lexical: literals ---------------------------------------------------------
    ("money_scale_in_param", wrap("param p: money between 1.005 and 2.00"), "PW105", 9, 24),
    ("money_scale_in_transfer", wrap(*tr("by a", "transfer 1.234 from x to y")), "PW105", 11, 12),
    ("money_scale_0", wrap("param p: money = 1.5").replace("scale 2", "scale 0"), "PW105", 9, 18),
    (
        "money_scale_in_guard",
        wrap("param p: money between 1.00 and 2.00", *tr("by a", "when p > 1.999")),
        "PW105",
        12,
        12,
    ),
    ("money_scale_in_invariant", wrap("invariant i: balance(x) >= 0.001"), "PW105", 9, 28),
    ("money_scale_in_budget", wrap("budget { ceiling 1.001 }"), "PW105", 9, 18),
    ("percent_five_decimals", wrap("param f: percent = 2.55555%"), "PW106", 9, 20),
    ("percent_double_sign", wrap("param f: percent = 10%%"), "PW106", 9, 20),
    ("percent_in_split", wrap(*split("33.33333% to y", "remaining to y")), "PW106", 12, 5),
    (
        "malformed_percent_param_used_in_split",
        wrap("param f: percent = 33.33.3333%", *split("f to y", "remaining to y")),
        "PW106",
        9,
        20,
    ),
    (
        "malformed_percent_bound_used_in_guard",
        wrap("param f: percent between 1.1.1% and 2%", *tr("by a", "when f > 1%")),
        "PW106",
        9,
        26,
    ),
    ("duration_unknown_unit", wrap("param w: duration = 12x"), "PW107", 9, 21),
    ("duration_misordered", wrap("param w: duration = 1h1d"), "PW107", 9, 21),
    ("duration_repeated_unit", wrap("param w: duration = 1d1d"), "PW107", 9, 21),
    ("duration_in_guard", wrap(*tr("by a", "stamp t0", "when now >= t0 + 3y")), "PW107", 12, 20),
    ("malformed_number", wrap("param p: money = 1.2.3"), "PW104", 9, 18),
    ("malformed_exponent", wrap("param p: money = 1e5"), "PW104", 9, 18),
    ("money_with_200_digits", wrap("param p: money = " + "9" * 200), "PW104", 9, 18),
    ("integer_with_200_digits", wrap("invariant i: fired(go) < " + "1" * 200), "PW104", 9, 26),
    # --- lexical: strings, words, characters, bytes --------------------------------------
    ("unterminated_string", wrap('account z "abc'), "PW102", 9, 11),
    ("string_across_lines", wrap('account z "abc', 'def"'), "PW102", 9, 11),
    ("invalid_escape", wrap('account z "a\\tb"'), "PW103", 9, 13),
    ("invalid_escape_in_clause", wrap('clause "4\\.2" invariant i: 1 > 0'), "PW103", 9, 10),
    ("unknown_keyword_transfr", wrap(*tr("by a", "transfr 1.00 from x to y")), "PW108", 11, 3),
    ("unknown_keyword_top_level", wrap("rol b"), "PW108", 9, 1),
    ("unknown_keyword_effect_field", wrap("effect f {", "  rsk R1", "}"), "PW108", 10, 3),
    ("unknown_keyword_decision", wrap("rule R1 alow"), "PW108", 9, 9, "expected `allow_with_grant`"),
    # New in 1.1: only a name an expression or a split could not refer to is refused.
    ("reserved_word_param_now", wrap("param now: money = 1.00"), "PW109", 9, 7, "read as the keyword"),
    ("store_role_operator", wrap("role operator"), "PW188", 9, 6, "the store's own role"),
    ("name_too_long", wrap("role " + "r" * 65), "PW189", 9, 6, "is 65 characters long; at most 64"),
    ("reserved_word_param_not", wrap("param not: money = 1.00"), "PW109", 9, 7, "in an expression"),
    ("reserved_word_param_final", wrap("param final: money = 1.00"), "PW109", 9, 7),
    ("reserved_word_param_remaining", wrap("param remaining: percent = 10%"), "PW109", 9, 7, "a split portion"),
    ("reserved_word_stamp", wrap(*tr("by a", "stamp now")), "PW109", 11, 9, "cannot name a stamp"),
    ("reserved_word_option", wrap("param r: one of yes, final"), "PW109", 9, 22, "`one of` value"),
    ("chain_too_long", wrap("invariant i: " + " + ".join(["1"] * 1001) + " > 0"), "PW187", 9, 14, "1001 terms"),
    ("chain_mixed_too_long", wrap("invariant i: " + " - ".join(["1"] * 200) + " > 0"), "PW187", 9, 14, "mixes"),
    ("keyword_glued_to_name", wrap("roleb"), "PW108", 9, 1, "`roleb`"),
    ("keyword_glued_to_keyword", wrap("state q initialfinal", "transition t2: s -> q { by a }"), "PW108", 9, 9),
    ("keyword_glued_to_number", wrap().replace("scale 2", "scale2"), "PW108", 2, 14, "`scale2`"),
    ("keyword_read_off_a_longer_word", wrap("rule R1 allowance"), "PW108", 9, 9, "`allowance`"),
    ("name_glued_to_upper_case", wrap("role bobX"), "PW101", 9, 9),
    # a lone CR ends a line (as editors show it): the comment must not swallow `role a`
    ("lone_cr_ends_a_comment", wrap("# note\rrole a"), "PW121", 10, 6),
    ("unexpected_character", wrap("role b$"), "PW101", 9, 7),
    ("unexpected_non_ascii", wrap("role café"), "PW101", 9, 9),
    ("unexpected_bidi_control", wrap("# note \u202e hidden"), "PW101", 9, 8),
    ("unexpected_line_separator", wrap("# note\u2028role b"), "PW101", 9, 7),
    ("not_utf8", "\n".join(SKELETON).encode() + b"\nrole \xff\n", "PW110", 9, 6),
    ("nul_byte", wrap("role b\x00"), "PW110", 9, 7),
    ("empty_file", "", "PW111", 1, 1),
    ("whitespace_only", " \n\t\n", "PW111", 1, 1),
    ("comments_only", "# nothing\n# here\n", "PW111", 1, 1),
    ("second_header", wrap('pact "u" version "2.0.0"'), "PW112", 9, 1),
    # the tree crosses its depth limit at the 99th `not` (4 characters each, from column 14)
    ("nested_too_deeply", wrap("invariant i: " + "not " * 150 + "1 > 0"), "PW113", 9, 14 + 4 * 98),
    ("file_too_large", b"#" * (MAX_POLICY_BYTES + 1), "PW114", 1, 1),
    # --- grammar: start, middle and end of a file ------------------------------------------
    ("missing_header", "currency EUR scale 2\nrole a\n", "PW100", 1, 1, "expected `pact`"),
    ("junk_before_header", "}}\n" + wrap(), "PW100", 1, 1, "expected `pact`"),
    ("word_before_header", "hello\n" + wrap(), "PW108", 1, 1, "expected `pact`"),
    ("declaration_before_header", "role a\n" + wrap(), "PW100", 1, 1, "expected `pact`"),
    ("header_without_version", 'pact "t" "1.0.0"\n', "PW100", 1, 10, "expected `version`"),
    ("middle_missing_arrow", wrap("transition t2: s e { by a }"), "PW100", 9, 18, "`->`"),
    ("middle_missing_colon", wrap("param p money = 1.00"), "PW100", 9, 9, "expected `:`"),
    ("middle_unclosed_paren", wrap(*tr("by a", "when (1 > 0")), "PW100", 12, 1, "`)`"),
    ("middle_missing_source", wrap("transition t2: -> e { by a }"), "PW100", 9, 16, "expected a name"),
    ("middle_dangling_comma", wrap(*tr("by a,")), "PW100", 11, 1, "expected a name"),
    ("end_unclosed_block", wrap("transition t2: s -> e {", "  by a"), "PW100", 11, 1, "`}`"),
    ("end_truncated_param", wrap("param p: money between"), "PW100", 10, 1, "expected a name, a number"),
    ("end_truncated_no_newline", "\n".join((*SKELETON, "state")), "PW100", 9, 6, "expected a name"),
    ("end_truncated_expression", wrap("invariant i: 1 >"), "PW100", 10, 1, "a number"),
    ("end_truncated_header", 'pact "t" version', "PW100", 1, 17, "expected a string"),
    # --- unknown names of every kind ---------------------------------------------------------------
    ("unknown_target_state", wrap("transition t2: s -> zz { by a }"), "PW120", 9, 21),
    ("unknown_source_state", wrap("transition t2: s, zz -> e { by a }"), "PW120", 9, 19),
    ("unknown_role", wrap(*tr("by a, zz")), "PW120", 10, 9),
    ("unknown_approver_role", wrap(*tr("by a", "approval by zz not requester")), "PW120", 11, 15),
    ("unknown_destination_account", wrap(*tr("by a", "transfer 1.00 from x to zz")), "PW120", 11, 27),
    ("unknown_source_account", wrap(*tr("by a", "transfer 1.00 from zz to y")), "PW120", 11, 22),
    ("unknown_split_account", wrap(*split("10% to zz", "remaining to y")), "PW120", 12, 12),
    ("unknown_param_as_amount", wrap(*tr("by a", "transfer amt from x to y")), "PW120", 11, 12),
    ("unknown_param_in_split", wrap(*split("cut to y", "remaining to y")), "PW120", 12, 5),
    ("unknown_param_in_key", wrap(*EFFECTS, "effect f {", "  risk R1", "  key order_id", "}"), "PW120", 13, 7),
    ("unknown_effect_called", wrap(*tr("by a", "call fetch")), "PW120", 11, 8),
    (
        "unknown_compensation_effect",
        wrap(*EFFECTS, "effect f {", "  risk R1", "  strategy compensate with undo", "}"),
        "PW120",
        13,
        28,
    ),
    ("unknown_name_in_guard", wrap(*tr("by a", "when price > 1.00")), "PW120", 11, 8),
    (
        "unknown_value_of_text_param",
        wrap("param r: one of damaged, lost", *tr("by a", "when r == stolen")),
        "PW120",
        12,
        13,
    ),
    ("unknown_name_in_invariant", wrap("invariant i: limit > 0"), "PW120", 9, 14),
    ("unknown_account_in_balance", wrap("invariant i: balance(vault) >= 0"), "PW120", 9, 22),
    ("unknown_transition_in_fired", wrap("invariant i: fired(go2) <= 1"), "PW120", 9, 20),
    ("unknown_state_in_reached", wrap("invariant i: reached(paid) implies final"), "PW120", 9, 22),
    ("unknown_name_in_applied", wrap("invariant i: applied(pay) <= 1"), "PW120", 9, 22),
    ("unknown_approved_transition", wrap("invariant i: approved(pay)"), "PW120", 9, 23),
    ("unknown_placeholder", wrap('account z "vault:{owner}"'), "PW120", 9, 11),
    # --- duplicates ----------------------------------------------------------------------
    ("duplicate_role", wrap("role a"), "PW121", 9, 6),
    ("duplicate_role_and_clock", wrap("clock a"), "PW121", 9, 7),
    ("duplicate_state", wrap("state s"), "PW121", 9, 7),
    ("duplicate_transition", wrap("transition go: s -> e { by a }"), "PW121", 9, 12),
    ("duplicate_account", wrap('account x "x2"'), "PW121", 9, 9),
    ("duplicate_account_address", wrap('account z "y"'), "PW121", 9, 11),
    ("duplicate_param", wrap("param p: money = 1.00", "param p: money = 2.00"), "PW121", 10, 7),
    ("duplicate_param_and_stamp", wrap("param t0: duration = 1d", *tr("by a", "stamp t0")), "PW121", 12, 9),
    ("duplicate_effect_field", wrap(*EFFECTS, "effect f {", "  risk R1", "  risk R1", "}"), "PW121", 13, 3),
    ("duplicate_by", wrap(*tr("by a", "by a")), "PW121", 11, 3),
    ("duplicate_currency", wrap("currency EUR scale 2"), "PW121", 9, 1),
    ("duplicate_default", wrap("default deny", "default deny"), "PW121", 10, 1),
    ("duplicate_option", wrap("param r: one of aa, bb, aa"), "PW121", 9, 25),
    ("duplicate_budget_item", wrap("budget {", "  max_turns 3", "  max_turns 4", "}"), "PW121", 11, 3),
    ("duplicate_state_flag", wrap("state q final final", "transition t2: s -> q { by a }"), "PW121", 9, 15),
    ("duplicate_transition_and_effect", wrap(*EFFECTS, "effect go { risk R1 }"), "PW121", 11, 8),
    # --- the state machine -----------------------------------------------------------------
    ("no_initial_state", wrap().replace("state s initial", "state s"), "PW122", 1, 1),
    ("several_initial_states", wrap("state q initial", "transition t2: q -> e { by a }"), "PW123", 9, 7),
    ("no_final_state", wrap("transition back: e -> s { by a }").replace("state e final", "state e"), "PW124", 1, 1),
    ("unreachable_state", wrap("state q final"), "PW125", 9, 7),
    ("final_state_with_exit", wrap("transition t2: e -> s { by a }"), "PW126", 9, 16),
    ("deadlock", wrap("state q", "transition t2: s -> q { by a }"), "PW127", 9, 7),
    (
        "deadlock_with_only_a_self_loop",
        wrap("state q", "transition t2: s -> q { by a }", "transition t3: q -> q { by a }"),
        "PW127",
        9,
        7,
    ),
    # --- values and splits -----------------------------------------------------------------------
    ("money_bounds_reversed", wrap("param p: money between 5.00 and 1.00"), "PW128", 9, 24),
    ("percent_bounds_reversed", wrap("param f: percent between 50% and 5%"), "PW128", 9, 26),
    ("bounds_reversed_integer_vs_decimal", wrap("param p: money between 10 and 9.99"), "PW128", 9, 24),
    ("split_without_remaining", wrap(*split("10% to y")), "PW129", 11, 3),
    ("remaining_not_last", wrap(*split("remaining to y", "10% to y")), "PW129", 12, 5),
    ("split_over_100_percent", wrap(*split("60% to y", "50% to y", "remaining to y")), "PW130", 11, 3),
    (
        "split_param_upper_bound_over_100_percent",
        wrap("param fee: percent between 10% and 95%", *split("fee to y", "10% to y", "remaining to y")),
        "PW130",
        12,
        3,
    ),
    ("split_mixes_percent_and_amount", wrap(*split("10% to y", "1.00 to y", "remaining to y")), "PW136", 13, 5),
    ("split_portion_is_duration", wrap(*split("1d to y", "remaining to y")), "PW137", 12, 5),
    # nested splits (new in 1.1): each block follows the split rules on its own
    ("nested_split_without_remaining", wrap(*split("1.00 to y", "remaining to {", "  10% to y", "}")), "PW129", 13, 5),
    (
        "nested_split_over_100_percent",
        wrap(*split("1.00 to y", "remaining to {", "  60% to y", "  50% to y", "  remaining to y", "}")),
        "PW130",
        13,
        5,
    ),
    (
        "nested_split_mixes_percent_and_amount",
        wrap(*split("remaining to {", "  10% to y", "  1.00 to y", "  remaining to y", "}")),
        "PW136",
        14,
        7,
    ),
    ("nested_split_to_source", wrap(*split("remaining to {", "  10% to x", "  remaining to y", "}")), "PW135", 13, 14),
    (
        "nested_split_unknown_account",
        wrap(*split("remaining to {", "  10% to z", "  remaining to y", "}")),
        "PW120",
        13,
        14,
    ),
    (
        "nested_split_too_deep",
        wrap(*split("remaining to {", "  remaining to {", "    remaining to y", "  }", "}")),
        "PW177",
        13,
        7,
    ),
    ("nested_split_empty", wrap(*split("1.00 to y", "remaining to {", "}")), "PW178", 13, 5),
    # --- effects and authority -------------------------------------------------------------------
    ("effect_without_rule_denied", wrap("default deny", "effect f { risk R3 }", *tr("by a", "call f")), "PW132", 13, 3),
    (
        "effect_rule_deny",
        wrap("default deny", "rule R3 deny", "effect f { risk R3 }", *tr("by a", "call f")),
        "PW132",
        14,
        3,
    ),
    (
        "compensation_effect_denied",
        wrap(*EFFECTS, "effect pay { risk R1 strategy compensate with undo }", "effect undo { risk R3 }"),
        "PW132",
        12,
        15,
    ),
    (
        "effect_needs_approval",
        wrap("default deny", "rule R4 require_approval", "effect f { risk R4 }", *tr("by a", "call f")),
        "PW131",
        14,
        3,
    ),
    ("untrusted_moves_money", wrap("role bot untrusted", *tr("by bot", "transfer 1.00 from x to y")), "PW133", 11, 6),
    (
        "untrusted_calls_effect_above_r1",
        wrap("default deny", "rule R2 allow", "role bot untrusted", "effect f { risk R2 }", *tr("by a, bot", "call f")),
        "PW133",
        14,
        9,
    ),
    ("untrusted_approves", wrap("role bot untrusted", *tr("by a", "approval by bot")), "PW133", 12, 15),
    ("clock_approves", wrap("clock tick", *tr("by a", "approval by tick")), "PW133", 12, 15),
    (
        "irreversible_retry",
        wrap(*EFFECTS, "effect f {", "  risk R1", "  reversibility irreversible", "  strategy retry", "}"),
        "PW134",
        14,
        3,
    ),
    ("transfer_to_itself", wrap(*tr("by a", "transfer 1.00 from x to x")), "PW135", 11, 27),
    # --- effects that move money -------------------------------------------------------------------
    ("r3_without_reversibility", wrap("default deny", "rule R3 allow", "effect f {", "  risk R3", "}"), "PW155", 11, 8),
    (
        "r4_retry_without_reversibility",
        wrap("default deny", "rule R4 allow", "effect pay { risk R4 strategy retry amount 1.00 }"),
        "PW155",
        11,
        8,
        "`reversibility`",
    ),
    (
        "irreversible_call_without_amount",
        wrap(*EFFECTS, "effect f { risk R1 reversibility irreversible }", *tr("by a", "call f")),
        "PW156",
        14,
        3,
    ),
    (
        "unset_reversibility_call_without_amount",
        wrap(*EFFECTS, "effect f { risk R1 }", *tr("by a", "call f")),
        "PW156",
        14,
        3,
    ),
    (
        "money_key_call_without_amount",
        wrap(
            *EFFECTS,
            "param p: money = 5.00",
            "effect f { risk R1 reversibility reversible key p }",
            *tr("by a", "call f amount p", "call f"),
        ),
        "PW156",
        16,
        3,
    ),
    (
        "compensable_call_without_amount",
        wrap(
            *EFFECTS,
            "effect undo { risk R1 reversibility not_applicable }",
            "effect f { risk R1 reversibility compensable strategy compensate with undo }",
            *tr("by a", "call f"),
        ),
        "PW156",
        15,
        3,
    ),
    (
        "idempotent_without_key",
        wrap(*EFFECTS, "effect f {", "  risk R1", "  reversibility reversible", "  strategy idempotent", "}"),
        "PW157",
        14,
        3,
    ),
    (
        "reconcilable_without_key",
        wrap(*EFFECTS, "effect f { risk R1 reversibility not_applicable strategy reconcilable }"),
        "PW157",
        11,
        49,
    ),
    (
        "consequence_names_no_payload_field",
        wrap(
            *EFFECTS,
            "param p: money = 5.00",
            'param o: text matching "O-[0-9]+"',
            "effect f {",
            "  risk R1",
            "  reversibility irreversible",
            "  key o",
            "  amount p",
            '  consequence "{p} paid for {order}"',
            "}",
        ),
        "PW158",
        18,
        29,
        "`{order}`",
    ),
    (
        "consequence_names_a_param_outside_the_payload",
        wrap(
            *EFFECTS,
            "param p: money = 5.00",
            "param q: money = 6.00",
            'effect f { risk R1 reversibility irreversible amount p consequence "{q} and {p}" }',
        ),
        "PW158",
        13,
        69,
        "`{q}`",
    ),
    (
        "consequence_placeholder_missing_at_one_call",
        wrap(
            *EFFECTS,
            "param p: money = 5.00",
            "param q: money = 6.00",
            'effect f { risk R1 reversibility irreversible consequence "{q}" }',
            *tr("by a", "call f amount q", "call f amount p"),
        ),
        "PW158",
        13,
        60,
    ),
    (
        "amount_at_effect_and_call",
        wrap(
            *EFFECTS,
            "param p: money = 5.00",
            "effect f { risk R1 reversibility irreversible amount p }",
            *tr("by a", "call f amount p"),
        ),
        "PW159",
        15,
        17,
    ),
    (
        "amount_not_money",
        wrap(*EFFECTS, "param r: percent = 5%", "effect f { risk R1 reversibility irreversible amount r }"),
        "PW160",
        12,
        54,
        "found percent",
    ),
    (
        "compensation_declares_a_ceiling",
        wrap(
            *EFFECTS,
            "effect u { risk R1 reversibility reversible ceiling 1.00 }",
            "effect f { risk R1 reversibility reversible strategy compensate with u }",
            *tr("by a", "call f"),
        ),
        "PW161",
        11,
        45,
        "would not be used",
    ),
    # --- effect outcomes (new in 1.1) ----------------------------------------------------------
    (
        "outcome_of_a_transition",
        wrap(
            *EFFECTS,
            "effect f { risk R1 reversibility reversible }",
            *tr("by a", "call f"),
            "invariant i: acknowledged(go)",
        ),
        "PW162",
        16,
        27,
        "is a transition",
    ),
    (
        "outcome_of_an_effect_nobody_calls",
        wrap(*EFFECTS, "effect f { risk R1 reversibility reversible }", "invariant i: not abandoned(f)"),
        "PW163",
        12,
        28,
        "never called",
    ),
    (
        "outcome_of_a_compensation_only",
        wrap(
            *EFFECTS,
            "effect u { risk R1 reversibility reversible }",
            "effect f { risk R1 reversibility reversible strategy compensate with u }",
            *tr("by a", "call f"),
            "invariant i: not reconciled(u)",
        ),
        "PW163",
        17,
        29,
        "only compensates",
    ),
    (
        "outcome_compared_with_a_number",
        wrap(
            *EFFECTS,
            "effect f { risk R1 reversibility reversible }",
            *tr("by a", "call f"),
            "invariant i: acknowledged(f) > 0",
        ),
        "PW164",
        16,
        30,
        "true/false",
    ),
    (
        "outcome_in_arithmetic",
        wrap(
            *EFFECTS,
            "effect f { risk R1 reversibility reversible }",
            *tr("by a", "call f"),
            "invariant i: abandoned(f) + 1 >= 1",
        ),
        "PW164",
        16,
        27,
    ),
    (
        "call_amount_reads_a_balance",
        wrap(*EFFECTS, "effect f { risk R1 reversibility irreversible }", *tr("by a", "call f amount balance(y)")),
        "PW160",
        14,
        17,
        "`balance(y)`",
    ),
    (
        "call_amount_reads_time",
        wrap(*EFFECTS, "effect f { risk R1 reversibility irreversible }", *tr("by a", "stamp t0", "call f amount t0")),
        "PW160",
        15,
        17,
    ),
    (
        "amount_twice_in_effect",
        wrap(
            *EFFECTS, "effect f {", "  risk R1", "  reversibility irreversible", "  amount 1.00", "  amount 2.00", "}"
        ),
        "PW121",
        15,
        3,
    ),
    (
        "amount_names_unknown_param",
        wrap(*EFFECTS, "effect f { risk R1 reversibility irreversible amount prcie }"),
        "PW120",
        11,
        54,
    ),
    ("split_to_itself", wrap(*split("10% to x", "remaining to y")), "PW135", 12, 12),
    # --- types, currency, values, required fields -------------------------------------------------
    ("guard_not_bool", wrap(*tr("by a", "when 1.00")), "PW137", 11, 8),
    ("compare_money_with_duration", wrap("param p: money = 1.00", *tr("by a", "when p > 1d")), "PW137", 12, 10),
    ("money_param_with_percent", wrap("param p: money = 5%"), "PW137", 9, 18),
    ("percent_transfer_amount", wrap(*tr("by a", "transfer 5% from x to y")), "PW137", 11, 12),
    ("text_ordered_comparison", wrap("param r: one of aa, bb", *tr("by a", "when r < aa")), "PW137", 12, 10),
    ("money_times_money", wrap("invariant i: balance(x) * balance(y) > 0"), "PW137", 9, 25),
    # the span of a keyword operator runs from the end of its left operand to its right one
    ("and_of_numbers", wrap("invariant i: 1 and 1 > 0"), "PW137", 9, 15),
    ("missing_currency", wrap().replace("currency EUR scale 2\n", ""), "PW138", 1, 1),
    ("bad_currency_code", wrap().replace("EUR", "E"), "PW138", 2, 10),
    ("currency_scale_over_8", wrap().replace("scale 2", "scale 9"), "PW138", 2, 20),
    ("currency_scale_decimal", wrap().replace("scale 2", "scale 2.5"), "PW138", 2, 20),
    ("currency_scale_with_5000_digits", wrap().replace("scale 2", "scale " + "9" * 5000), "PW138", 2, 20),
    ("integer_field_beyond_2_53", wrap("budget { max_turns 9007199254740992 }"), "PW139", 9, 20),
    ("bad_regex", wrap('param r: text matching "(["'), "PW139", 9, 24),
    ("regex_the_schema_engine_refuses", wrap('param r: text matching "(?=a)a"'), "PW139", 9, 24),
    ("regex_nested_too_deeply", wrap('param r: text matching "' + "(" * 2000 + ")" * 2000 + '"'), "PW139", 9, 24),
    ("division_by_zero", wrap(*tr("by a", "when applied(go) / (1 - 1) >= 0")), "PW139", 11, 23),
    ("unknown_risk_class", wrap("default deny", "effect f { risk R9 }"), "PW139", 10, 17),
    ("unknown_rule_risk_class", wrap("rule R0 allow"), "PW139", 9, 6),
    (
        "unknown_http_method",
        wrap(*EFFECTS, "effect f {", "  risk R1", '  egress FETCH "https://x"', "}"),
        "PW139",
        13,
        10,
    ),
    ("max_calls_zero", wrap(*EFFECTS, "effect f {", "  risk R1", "  max_calls 0", "}"), "PW139", 13, 13),
    ("budget_max_turns_zero", wrap("budget { max_turns 0 }"), "PW139", 9, 20),
    ("effect_without_risk", wrap("default deny", "effect f { timeout 5s }"), "PW140", 10, 8),
    ("transition_without_by", wrap("transition t2: s -> e { }"), "PW140", 9, 12),
    ("address_not_ledger_name", wrap('account z "has space"'), "PW141", 9, 11),
    ("world_not_external", wrap('account w "world"'), "PW141", 9, 11),
    # --- warnings: reported, but the policy still has a candidate ------------------------------
    (
        "guard_never_holds_money",
        wrap("param p: money between 1.00 and 5.00", *tr("by a", "when p > 10.00")),
        "PW150",
        12,
        8,
    ),
    ("guard_never_holds_percent", wrap("param f: percent = 10%", *tr("by a", "when f > 20%")), "PW150", 12, 8),
    (
        "deadline_without_clock",
        wrap("param w: duration = 1d", *tr("by a", "stamp t0", "when now >= t0 + w")),
        "PW151",
        13,
        3,
    ),
    (
        "effect_ceiling_below_param_bound",
        wrap(
            *EFFECTS,
            "param p: money between 1.00 and 500.00",
            "effect f {",
            "  risk R1",
            "  ceiling 100.00",
            "  reversibility reversible",
            "}",
            *tr("by a", "call f", "transfer p from x to y"),
        ),
        "PW152",
        14,
        3,
    ),
    (
        "effect_ceiling_below_declared_amount",
        wrap(
            *EFFECTS,
            "param p: money between 1.00 and 500.00",
            "effect f {",
            "  risk R1",
            "  ceiling 100.00",
            "  reversibility irreversible",
            "  amount p",
            "}",
            *tr("by a", "call f"),
        ),
        "PW152",
        14,
        3,
        "the most its amount can be",
    ),
    (
        "effect_ceiling_below_call_site_amount",
        wrap(
            *EFFECTS,
            "param p: money between 1.00 and 500.00",
            "effect f { risk R1 ceiling 100.00 reversibility irreversible }",
            *tr("by a", "call f amount p + 1.00"),
        ),
        "PW152",
        12,
        20,
        "the most its amount can be",
    ),
    (
        "budget_ceiling_below_param_bound",
        wrap("param p: money between 1.00 and 500.00", "budget {", "  ceiling 100.00", "}"),
        "PW152",
        11,
        3,
    ),
    (
        "budget_ceiling_below_fixed_param",
        wrap("param p: money = 500.00", "budget { ceiling 100.00 }"),
        "PW152",
        10,
        10,
    ),
    (
        "accounts_that_may_alias",
        wrap('account p1 "parties:{a}"', 'account p2 "parties:{agreement}"'),
        "PW154",
        10,
        12,
    ),
    (
        "effects_without_default_deny",
        wrap("rule R1 allow", "effect f { risk R1 reversibility not_applicable }", *tr("by a", "call f")),
        "PW153",
        10,
        8,
    ),
    # --- related amounts (new in 1.1): bounds that name another money param ---------
    ("related_bound_unknown", wrap("param partial: money between 0.00 and prise"), "PW166", 9, 39, "`prise`"),
    (
        "related_bound_percent_param",
        wrap("param fee: percent between 0% and 20%", "param partial: money between 0.00 and fee"),
        "PW167",
        10,
        39,
        "which is percent",
    ),
    (
        "related_bound_duration_param",
        wrap("param hold: duration = 14d", "param partial: money between hold and 5.00"),
        "PW167",
        10,
        30,
        "which is duration",
    ),
    (
        "related_bound_on_percent",
        wrap("param price: money between 1.00 and 5.00", "param share: percent between 0% and price"),
        "PW168",
        10,
        37,
    ),
    ("related_bound_self", wrap("param p: money between 0.00 and p"), "PW169", 9, 33, "by itself"),
    (
        "related_bound_cycle",
        wrap("param a: money between 0.00 and b", "param b: money between 0.00 and a"),
        "PW169",
        9,
        33,
        "a <= b <= a",
    ),
    (
        "related_bound_cycle_lower",
        wrap("param a: money between b and 5.00", "param b: money between a and 9.00"),
        "PW169",
        10,
        24,
    ),
    (
        "related_bound_empty",
        wrap("param price: money between 1.00 and 500.00", "param partial: money between 600.00 and price"),
        "PW170",
        10,
        7,
        "at least 600.00 and at most 500.00",
    ),
    (
        "related_bound_empty_through_another",
        wrap(
            "param b: money between 0.00 and 1000.00",
            "param a: money between 300.00 and b",
            "param c: money between b and 200.00",
        ),
        "PW170",
        10,
        7,
    ),
    # --- liveness properties (new in 1.1) ------------------------------------------------
    ("property_reads_now", wrap("property p: reached(s) leads_to now >= now"), "PW171", 9, 33, "may not read time"),
    (
        "eventually_final_without_final",
        "\n".join(s for s in SKELETON if s != "state e final").replace("state s initial", "state s initial\nstate e")
        + "\nproperty done: eventually final\n",
        "PW172",
        9,
        1,
        "no state is `final`",
    ),
    ("property_unknown_name", wrap("property p: reached(s) leads_to reached(nowhere)"), "PW120", 9, 41, "nowhere"),
    ("property_not_boolean", wrap("property p: balance(y) leads_to reached(e)"), "PW137", 9, 13, "found money"),
    (
        "property_named_like_an_invariant",
        wrap("invariant p: balance(y) >= 0", "property p: reached(s) leads_to final"),
        "PW121",
        10,
        10,
        "declared twice",
    ),
    # --- four eyes (new in 1.1) --------------------------------------------------------------------
    ("four_eyes_unknown_role", wrap("role b", *tr("by a", "approval by b, nobody distinct")), "PW120", 12, 18),
    ("four_eyes_untrusted", wrap("role bot untrusted", *tr("by a", "approval by a, bot distinct")), "PW133", 12, 18),
    ("four_eyes_role_twice", wrap("role b", *tr("by a", "approval by b, b distinct")), "PW173", 12, 18, "twice"),
    ("four_eyes_one", wrap("role b", *tr("by a", "approvals 1 by b distinct")), "PW174", 12, 13, "at least 2"),
    ("four_eyes_too_many", wrap("role b", *tr("by a", "approvals 9 by b distinct")), "PW175", 12, 13, "more than 5"),
    ("four_eyes_not_distinct", wrap("role b", *tr("by a", "approval by a, b")), "PW176", 12, 3, "`distinct`"),
    ("four_eyes_n_not_distinct", wrap("role b", *tr("by a", "approvals 2 by b")), "PW176", 12, 3, "`distinct`"),
    # --- limits across agreements (new in 1.1) -------------------------------------------
    ("limit_unknown_effect", wrap("limit d: total(nothing) <= 5.00 per 1d"), "PW182", 9, 16, "unknown effect"),
    (
        "limit_effect_without_money",
        wrap(*EFFECTS, "effect pay { risk R1 }", "limit d: total(pay) <= 5.00 per 1d"),
        "PW183",
        12,
        16,
        "carry none",
    ),
    (
        "limit_not_at_most",
        wrap(*EFFECTS, "effect pay { risk R1 amount 1.00 }", "limit d: total(pay) < 5.00 per 1d"),
        "PW184",
        12,
        21,
        "not `<`",
    ),
    (
        "limit_amount_not_money",
        wrap(*EFFECTS, "effect pay { risk R1 amount 1.00 }", "limit d: total(pay) <= 10% per 1d"),
        "PW184",
        12,
        24,
        "money amount",
    ),
    (
        "limit_zero_window",
        wrap(*EFFECTS, "effect pay { risk R1 amount 1.00 }", "limit d: total(pay) <= 5.00 per 0d"),
        "PW185",
        12,
        33,
        "positive duration",
    ),
    (
        "limit_window_not_a_duration",
        wrap(*EFFECTS, "effect pay { risk R1 amount 1.00 }", "limit d: total(pay) <= 5.00 per 5"),
        "PW185",
        12,
        33,
        "window `5`",
    ),
    (
        "limit_per_unknown_role",
        wrap(*EFFECTS, "effect pay { risk R1 amount 1.00 }", "limit d: total(pay) <= 5.00 per 1d per nobody"),
        "PW186",
        12,
        40,
        "not a declared role",
    ),
    (
        "limit_declared_twice",
        wrap(
            *EFFECTS,
            "effect pay { risk R1 amount 1.00 }",
            "limit d: total(pay) <= 5.00 per 1d",
            "limit d: total(pay) <= 6.00 per 1d",
        ),
        "PW121",
        13,
        7,
        "declared twice",
    ),
]

WARNINGS = {code for code, title in CODES.items() if "(warning)" in title}


def _params() -> list[object]:
    out = []
    for row in ROWS:
        name, source, code, line, column, *rest = row
        out.append(pytest.param(source, code, line, column, rest[0] if rest else None, id=name))
    return out


def _check(source: str | bytes) -> CheckResult:
    return check_bytes(source if isinstance(source, bytes) else source.encode("utf-8"))


def _show(result: CheckResult) -> str:
    return "\n".join(
        f"  {d.code} {d.severity.value} {d.span.line}:{d.span.column} {d.message}" for d in result.diagnostics
    )


@pytest.mark.parametrize(("source", "code", "line", "column", "in_message"), _params())
def test_diagnostic(source: str | bytes, code: str, line: int, column: int, in_message: str | None) -> None:
    result = _check(source)
    found = [d for d in result.diagnostics if d.code == code and (d.span.line, d.span.column) == (line, column)]
    assert found, f"expected {code} at {line}:{column}; got:\n{_show(result)}"
    diagnostic = found[0]
    if in_message is not None:
        assert in_message in diagnostic.message
    if code in WARNINGS:
        assert diagnostic.severity is Severity.WARNING
        assert not result.blockers, f"a warning row must have only warnings:\n{_show(result)}"
        assert result.candidate is not None
        assert result.ok
    else:
        assert diagnostic.severity is Severity.ERROR
        assert result.candidate is None
        assert not result.ok


@pytest.mark.parametrize(("source", "code", "line", "column", "in_message"), _params())
def test_every_diagnostic_reads_well(
    source: str | bytes, code: str, line: int, column: int, in_message: str | None
) -> None:
    """Messages are lowercase-first and one line; every diagnostic has a one-line hint and a real span."""
    for diagnostic in _check(source).diagnostics:
        message, hint = diagnostic.message, diagnostic.hint
        assert diagnostic.code in CODES
        assert message and not message[0].isupper(), message
        assert "\n" not in message and message == message.strip(), message
        assert hint and "\n" not in hint and hint == hint.strip(), (diagnostic.code, message, hint)
        span = diagnostic.span
        assert span.line >= 1 and span.column >= 1
        assert (span.end_line, span.end_column) >= (span.line, span.column)


def _front_end_codes() -> set[str]:
    return {code for code in CODES if re.fullmatch(r"PW1[0-9][0-9]", code)} - {"PW199"}


def test_table_covers_every_front_end_code() -> None:
    covered = {row[2] for row in ROWS}
    missing = sorted(_front_end_codes() - covered)
    assert not missing, f"no row in the table emits {missing}"


def test_table_is_big_and_ids_are_unique() -> None:
    names = [row[0] for row in ROWS]
    assert len(names) >= 70
    assert len(set(names)) == len(names)


def test_skeleton_is_a_valid_policy() -> None:
    result = _check(wrap())
    assert result.diagnostics == []
    assert result.candidate is not None
    assert FIRST == 9


def test_every_static_check_is_in_the_table() -> None:
    """A new check is one function and one row: each registered code must have a row."""
    from pactwright.compiler.checks import REGISTRY

    covered = {row[2] for row in ROWS}
    for registered in REGISTRY:
        assert set(registered.codes) & covered, f"check `{registered.name}` has no row"


def test_every_emitted_code_is_documented() -> None:
    for row in ROWS:
        for diagnostic in _check(row[1]).diagnostics:
            assert diagnostic.code in CODES, (row[0], diagnostic.code)
