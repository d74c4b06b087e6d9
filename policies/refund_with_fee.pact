# A refund desk with a percent restocking fee decided per agreement, an
# idempotent payout effect, and a human approval bound to the payload.
pact "support.refund_with_fee" version "1.0.0"

currency USD scale 2
default deny

role agent
role supervisor
role assistant untrusted

param amount: money between 1.00 and 250.00
param restocking: percent between 0% and 15%
param order_id: text matching "[A-Z]{2}-[0-9]{6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"
account restock  "merchant:restocking"

rule R1 allow
rule R3 require_approval

effect lookup_order {
  risk R1
  reversibility not_applicable
  scopes "orders:read"
  egress GET "https://orders.example.com"
  max_calls 5
  timeout 3s
  strategy retry
}

effect send_payout {
  risk R3
  reversibility irreversible
  scopes "payouts:write"
  egress POST "https://payouts.example.com"
  max_calls 1
  timeout 20s
  ceiling 250.00
  strategy idempotent
  key order_id, amount
  amount amount
  consequence "{amount} minus a restocking fee will be paid to the card of order {order_id}."
}

state opened initial
state reviewed
state paid final
state rejected final

clause "1" transition review: opened -> reviewed {
  by assistant
  call lookup_order
}

clause "2" transition pay: reviewed -> paid {
  by agent
  approval by supervisor not requester
  call send_payout
  transfer amount from merchant {
    restocking to restock
    remaining to customer
  }
}

clause "3" transition reject: opened, reviewed -> rejected {
  by agent, supervisor
}

clause "4.1" invariant payout_at_most_once: applied(send_payout) <= 1
clause "4.2" invariant payout_within_ceiling: total(send_payout) <= 250.00
clause "4.3" invariant payout_only_when_approved: applied(send_payout) > 0 implies approved(pay)
