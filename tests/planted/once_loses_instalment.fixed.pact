# FIXED twin of once_loses_instalment.bug.pact: `pay_supplier` is
# `idempotent`, so the runtime repeats a failed or unknown payment with the
# same key until it lands, and the bank deduplicates a repeat of one that
# already did. The next instalment cannot be committed while the current
# one is still in flight.
pact "planted.once_loses_instalment" version "1.0.1"

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
  strategy idempotent
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
