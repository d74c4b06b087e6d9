# PLANTED BUG: a money-moving effect with no approval.
# The payout effect was classed R2 (`allow`) instead of R3
# (`require_approval`), so the static checks accept `pay` without an
# approval, while the policy's own invariant says a payout happens only when
# approved. A reviewer should see: review, pay, the worker dispatches the
# payout; `payout_only_when_approved` violated (approved(pay) is false).
# Fix: risk R3 under `rule R3 require_approval`, and
# `approval by supervisor not requester` on `pay`.
pact "planted.approval_less_payout" version "1.0.0"

currency USD scale 2
default deny

role agent
role supervisor
role assistant untrusted

param amount: money between 1.00 and 250.00
param order_id: text matching "[A-Z]{2}-[0-9]{6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

rule R2 allow
rule R3 require_approval

effect send_payout {
  risk R2
  reversibility irreversible
  scopes "payouts:write"
  egress POST "https://payouts.example.com"
  max_calls 1
  timeout 20s
  strategy idempotent
  key order_id, amount
  amount amount
  consequence "{amount} will be paid to the card of order {order_id}."
}

state opened initial
state reviewed
state paid final
state rejected final

clause "1" transition review: opened -> reviewed {
  by assistant
}

clause "2" transition pay: reviewed -> paid {
  by agent
  call send_payout
  transfer amount from merchant to customer
}

clause "3" transition reject: opened, reviewed -> rejected {
  by agent, supervisor
}

clause "4.1" invariant payout_at_most_once: applied(send_payout) <= 1
clause "4.2" invariant payout_only_when_approved: applied(send_payout) > 0 implies approved(pay)
