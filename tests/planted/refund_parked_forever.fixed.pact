# FIXED twin of refund_parked_forever.bug.pact: the refund is `idempotent`, so after a
# lost response the worker sends it again with the same key; it is always answered.
pact "planted.refund_parked_forever_fixed" version "1.0.0"

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

clause "5" property refund_is_answered: fired(refund) >= 1 leads_to acknowledged(refund_payment) or reconciled(refund_payment) or abandoned(refund_payment)
