# PLANTED BUG: a seller payout through a provider, retried without an
# idempotency key.
# The escrow is paid out by a payment provider (`psp_payout`, which carries
# the price). The effect is declared `reversibility reversible` (a payout can
# be recalled the same day), so `strategy retry` passes the static checks,
# but the provider does not deduplicate: when its response to a payout that
# went through is lost, the runtime sends the payout again and the seller is
# paid twice for one release.
# A reviewer should see: fund, release, the payout goes through but its
# response is lost, the runtime retries, the worker dispatches again; the
# payout is applied twice for one commit of `release` (built-in
# `effect_applied_once`) and carries twice the price (`paid_out_once`).
# Fix: `strategy idempotent` with the order id as the key.
pact "planted.payout_retry_without_key" version "1.0.0"

currency EUR scale 2
default deny

role buyer
role ops

param price: money between 1.00 and 2000.00
param order_id: text matching "ORD-[0-9]{1,10}"

account world  "world" external
account escrow "escrow:{agreement}"
account sent   "psp:payouts-sent" external

rule R3 allow

effect psp_payout {
  risk R3
  reversibility reversible
  scopes "payouts:write"
  egress POST "https://psp.example.com/v1/payouts"
  timeout 10s
  strategy retry
  amount price
  consequence "{price} will be paid out to the seller."
}

state open initial
state funded
state released final

clause "1" transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition release: funded -> released {
  by ops
  call psp_payout
  transfer price from escrow to sent
}

clause "3" invariant paid_out_once: total(psp_payout) <= price
