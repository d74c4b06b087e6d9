# PLANTED BUG: a once-per-agreement effect called from a second clause.
# `issue_voucher` may be applied at most once per agreement (the policy's own
# `voucher_at_most_once`; it declares no `max_calls`, which the runtime would
# enforce at commit, PW523). The goodwill clause added
# later reuses the same effect from `resolved`, so a customer who already got
# the compensation voucher gets a second one. A reviewer should see:
# make_good, goodwill, and the worker dispatches both vouchers;
# `voucher_at_most_once` violated.
# Fix: `goodwill` leaves only from `open`, where no voucher was issued yet.
pact "planted.second_call_site" version "1.0.0"

currency EUR scale 2
default deny

role agent

param value: money between 5.00 and 50.00
param ticket: text matching "SUP-[0-9]{1,8}"

account marketing "marketing:vouchers" external
account customer  "customers:{ticket}:vouchers"

rule R2 allow

effect issue_voucher {
  risk R2
  reversibility compensable
  scopes "vouchers:write"
  egress POST "https://vouchers.example.com"
  timeout 5s
  strategy idempotent
  key ticket, value
  amount value
  consequence "a voucher worth {value} will be issued for ticket {ticket}."
}

state open initial
state resolved
state closed final

clause "1" transition make_good: open -> resolved {
  by agent
  call issue_voucher
  transfer value from marketing to customer
}

clause "2" transition goodwill: open, resolved -> closed {
  by agent
  call issue_voucher
  transfer value from marketing to customer
}

clause "3" transition close: resolved -> closed {
  by agent
}

clause "4" invariant voucher_at_most_once: applied(issue_voucher) <= 1
