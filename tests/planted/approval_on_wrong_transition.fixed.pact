# FIXED twin of approval_on_wrong_transition.bug.pact: the supervisor's
# one-use approval is bound to `pay`, the step that sends money.
pact "planted.approval_on_wrong_transition" version "1.0.1"

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
}

clause "2" transition pay: reviewed -> paid {
  by agent
  approval by supervisor not requester
  call send_claim_payment
  transfer amount from insurer to claimant
}

clause "3" transition decline: filed, reviewed -> denied {
  by agent, supervisor
}

clause "4.1" invariant payment_at_most_once: applied(send_claim_payment) <= 1
clause "4.2" invariant payout_only_when_approved: applied(send_claim_payment) > 0 implies approved(pay)
