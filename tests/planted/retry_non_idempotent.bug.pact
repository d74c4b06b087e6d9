# PLANTED BUG: strategy `retry` on an effect that moves money.
# `send_payout` is marked `reversibility reversible` (a payout can be clawed
# back), which the static checks accept with `retry`, but the provider does
# not deduplicate: when the response to a payout that went through is lost,
# the runtime sends it again. A reviewer should see: pay, the worker's
# request goes through but its response is lost, the runtime retries, the
# worker dispatches again; the payout is applied twice
# (`payout_at_most_once` and the built-in `effect_max_calls`).
# Fix: `strategy idempotent` with a key (the provider deduplicates).
pact "planted.retry_non_idempotent" version "1.0.0"

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
  strategy retry
  key ticket
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
