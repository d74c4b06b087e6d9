# PLANTED BUG: the approval guards the wrong step.
# A supervisor's approval was put on `review` (which moves nothing) instead
# of on `pay`, which sends the payout. The payout effect is risk R2
# (`allow_with_grant`), so no static check objects. The policy's invariant
# says a payout happens only with an approval of `pay`.
# A reviewer should see: the supervisor approves the review, review, pay,
# the worker dispatches the payout; `payout_only_when_approved` violated.
# Fix: move `approval by supervisor not requester` to `pay`.
pact "planted.approval_on_wrong_transition" version "1.0.0"

currency EUR scale 2
default deny

role agent
role supervisor

param amount: money between 1.00 and 400.00
param claim: text matching "CL-[0-9]{6}"

account insurer  "insurer:claims" external
account claimant "claimants:{claim}:bank"

rule R2 allow_with_grant

effect send_claim_payment {
  risk R2
  reversibility irreversible
  scopes "claims:pay"
  egress POST "https://payments.example.com"
  max_calls 1
  timeout 20s
  strategy reconcilable
  key claim, amount
  amount amount
  consequence "{amount} will be paid to the bank account on claim {claim}."
}

state filed initial
state reviewed
state paid final
state denied final

clause "1" transition review: filed -> reviewed {
  by agent
  approval by supervisor not requester
}

clause "2" transition pay: reviewed -> paid {
  by agent
  call send_claim_payment
  transfer amount from insurer to claimant
}

clause "3" transition decline: filed, reviewed -> denied {
  by agent, supervisor
}

clause "4.1" invariant payment_at_most_once: applied(send_claim_payment) <= 1
clause "4.2" invariant payout_only_when_approved: applied(send_claim_payment) > 0 implies approved(pay)
