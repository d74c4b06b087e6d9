# PLANTED BUG: a refund whose answer was lost can wait for an operator forever.
# The refund is `reconcilable`: after a lost response the call parks in
# needs_reconciliation until an operator reconciles or abandons it, and no
# operator is obliged to act, so "every dispatched refund is eventually
# acknowledged, reconciled or abandoned" does not hold on a fair run.
# A reviewer should see: fund, time passes, refund, a fault on refund_payment,
# the runtime parking it, then stuttering with only the operator able to act;
# `refund_is_answered` violated.
# Fix: the provider deduplicates by key, so the refund is `idempotent`: the
# worker (which does act) sends it again with the same key until it is answered.
pact "planted.refund_parked_forever" version "1.0.0"

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
  strategy reconcilable
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
