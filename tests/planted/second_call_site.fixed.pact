# FIXED twin of second_call_site.bug.pact: the goodwill voucher is issued
# only from `open`; a resolved ticket that already got its voucher is closed
# without another.
pact "planted.second_call_site" version "1.0.1"

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

clause "2" transition goodwill: open -> closed {
  by agent
  call issue_voucher
  transfer value from marketing to customer
}

clause "3" transition close: resolved -> closed {
  by agent
}

clause "4" invariant voucher_at_most_once: applied(issue_voucher) <= 1
