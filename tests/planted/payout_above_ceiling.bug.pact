# PLANTED BUG: order values above the payout provider's ceiling.
# The marketplace raised its largest order to 150.00, but the payment
# provider's contract still caps a single payout at 100.00 (`ceiling` of
# `psp_payout`, which carries the price). The runtime refuses a release whose
# payout is above the ceiling, and no other transition moves a funded
# order's money: an order above 100.00 is funded and then stuck.
# A reviewer should see: fund at a price above 100.00; `release` can never
# commit and the escrow keeps the price (built-in `funds_not_stuck`); check
# warns PW152. Fix: orders above the ceiling are paid out by bank transfer
# (`pay_by_transfer`), without the provider.
pact "planted.payout_above_ceiling" version "1.0.0"

currency EUR scale 2
default deny

role buyer
role ops

param price: money between 1.00 and 150.00
param order_id: text matching "ORD-[0-9]{1,10}"

account world  "world" external
account escrow "escrow:{agreement}"
account sent   "psp:payouts-sent" external
account bank   "bank:transfers-sent" external

rule R3 allow

effect psp_payout {
  risk R3
  reversibility reversible
  scopes "payouts:write"
  egress POST "https://psp.example.com/v1/payouts"
  timeout 10s
  ceiling 100.00
  strategy idempotent
  key order_id
  amount price
  consequence "{price} will be paid out to the seller for order {order_id}."
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

clause "3" invariant escrow_empty_when_final: final implies balance(escrow) == 0
