# FIXED twin of payout_retry_without_key.bug.pact: the payout is sent with
# the order id as its idempotency key (`strategy idempotent`, `key order_id`),
# so a payout retried after a lost response is deduplicated by the provider.
pact "planted.payout_retry_without_key" version "1.0.1"

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

clause "3" invariant paid_out_once: total(psp_payout) <= price
