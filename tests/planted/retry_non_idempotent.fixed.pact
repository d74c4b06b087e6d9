# FIXED twin of retry_non_idempotent.bug.pact: the payout is repeated only
# with the same idempotency key (`strategy idempotent`, `key ticket, amount`),
# so a lost response followed by a retry is deduplicated by the provider.
pact "planted.retry_non_idempotent" version "1.0.1"

currency EUR scale 2
default deny

role agent

param amount: money between 1.00 and 300.00
param ticket: text matching "T-[0-9]{1,8}"

account merchant "merchant:payouts" external
account customer "customers:{ticket}:wallet"

rule R2 allow

effect send_payout {
  risk R2
  reversibility reversible
  scopes "payouts:write"
  egress POST "https://payouts.example.com"
  max_calls 1
  timeout 10s
  strategy idempotent
  key ticket, amount
  amount amount
  consequence "{amount} will be paid to the wallet of ticket {ticket}."
}

state open initial
state paid final
state closed final

clause "1" transition pay: open -> paid {
  by agent
  call send_payout
  transfer amount from merchant to customer
}

clause "2" transition close: open -> closed {
  by agent
}

clause "3" invariant payout_at_most_once: applied(send_payout) <= 1
