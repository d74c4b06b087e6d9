# FIXED twin of approval_less_payout.bug.pact: the payout is risk R3, which
# requires approval, and `pay` waits for a supervisor's one-use approval.
pact "planted.approval_less_payout" version "1.0.1"

currency USD scale 2
default deny

role agent
role supervisor
role assistant untrusted

param amount: money between 1.00 and 250.00
param order_id: text matching "[A-Z]{2}-[0-9]{6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

rule R3 require_approval

effect send_payout {
  risk R3
  reversibility irreversible
  scopes "payouts:write"
  egress POST "https://payouts.example.com"
  max_calls 1
  timeout 20s
  strategy idempotent
  key order_id, amount
  amount amount
  consequence "{amount} will be paid to the card of order {order_id}."
}

state opened initial
state reviewed
state paid final
state rejected final

clause "1" transition review: opened -> reviewed {
  by assistant
}

clause "2" transition pay: reviewed -> paid {
  by agent
  approval by supervisor not requester
  call send_payout
  transfer amount from merchant to customer
}

clause "3" transition reject: opened, reviewed -> rejected {
  by agent, supervisor
}

clause "4.1" invariant payout_at_most_once: applied(send_payout) <= 1
clause "4.2" invariant payout_only_when_approved: applied(send_payout) > 0 implies approved(pay)
