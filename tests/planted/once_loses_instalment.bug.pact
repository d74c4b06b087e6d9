# PLANTED BUG: strategy `once` on a payment that must eventually happen.
# Three monthly instalments are paid to a supplier through `pay_supplier`.
# It was marked `once` ("a payment is never repeated"), so when a request
# fails or its outcome is unknown the runtime gives up on it (FAILED, or
# ABANDONED_UNCERTAIN after a lost request) and the treasurer moves on to
# the next period: the ledger says the instalment was paid, the supplier
# never got it. A reviewer should see: pay_instalment, the provider answers
# with an error, next_period, pay_instalment; `no_instalment_lost` violated
# (two instalments committed, none applied). The same violation follows a
# lost request that the runtime abandons (one event longer). After that
# abandon the runtime refuses the next instalment for good (it depends on
# `pay_supplier`, PW526), so `funds_not_stuck` is violated too, on its own path.
# Fix: `strategy idempotent` (repeat with the same key until it lands).
pact "planted.once_loses_instalment" version "1.0.0"

currency EUR scale 2
default deny

role treasurer

param instalment: money between 10.00 and 1000.00
param contract: text matching "C-[0-9]{4}"

account treasury "treasury:outgoing" external
account supplier "suppliers:{contract}:received"

rule R2 allow

effect pay_supplier {
  risk R2
  reversibility irreversible
  scopes "payments:write"
  egress POST "https://bank.example.com"
  max_calls 3
  timeout 30s
  strategy once
  key contract, instalment
  amount instalment
  consequence "{instalment} will be paid to the supplier of contract {contract}."
}

state due initial
state paid
state completed final

clause "1" transition pay_instalment: due -> paid {
  by treasurer
  call pay_supplier
  transfer instalment from treasury to supplier
}

clause "2" transition next_period: paid -> due {
  by treasurer
  when fired(pay_instalment) < 3
}

clause "3" transition complete: paid -> completed {
  by treasurer
  when fired(pay_instalment) >= 3
}

clause "4.1" invariant no_instalment_lost: fired(pay_instalment) <= applied(pay_supplier) + 1
clause "4.2" invariant no_instalment_doubled: applied(pay_supplier) <= fired(pay_instalment)
