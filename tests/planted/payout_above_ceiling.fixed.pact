# FIXED twin of payout_above_ceiling.bug.pact: an order above the provider's
# 100.00 ceiling is paid out by bank transfer (`pay_by_transfer`), so every
# funded order can be released.
pact "planted.payout_above_ceiling" version "1.0.1"

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

clause "2.1" transition pay_by_transfer: funded -> released {
  by ops
  when price > 100.00
  transfer price from escrow to bank
}

clause "3" invariant escrow_empty_when_final: final implies balance(escrow) == 0
