# Reference policy (new in 1.1): what must eventually happen. A buyer funds an
# escrow; the buyer confirms, or the clock refunds after the window. A refund
# is a provider call: every refund that was sent must end acknowledged,
# reconciled or abandoned, with no human obliged to act.
pact "escrow.liveness" version "1.0.0"

currency EUR scale 2
default deny

role buyer
clock timer

param price: money = 40.00
param order_id: text matching "ORD-[0-9]{1,6}"
param window: duration = 7d

account world "world" external
account escrow "escrow:{order_id}"
account seller "sellers:{order_id}"

rule R3 allow

effect refund_payment {
  risk R3
  reversibility irreversible
  scopes "payments:refund"
  egress POST "https://api.payments.example.com"
  timeout 10s
  strategy idempotent
  key order_id
  amount price
}

state placed initial
state funded
state settled final
state refunded final

clause "1" transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer price from world to escrow
}

clause "2" transition confirm: funded -> settled {
  by buyer
  transfer balance(escrow) from escrow to seller
}

clause "3" transition refund: funded -> refunded {
  by timer
  when now >= funded_at + window
  call refund_payment
  transfer balance(escrow) from escrow to world
}

invariant escrow_never_negative: balance(escrow) >= 0

clause "4" property funded_is_settled: reached(funded) leads_to reached(settled) or reached(refunded)
clause "5" property refund_is_answered: fired(refund) >= 1 leads_to acknowledged(refund_payment) or reconciled(refund_payment) or abandoned(refund_payment)
