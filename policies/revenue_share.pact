# A three-way revenue share with uneven percents: every minor unit of a
# payout is accounted for, leftovers going to the portions in order.
pact "media.revenue_share" version "0.3.0"

currency JPY scale 0

role publisher
role auditor
clock scheduler

param payout: money between 1 and 5000000
param author_share: percent = 33.3333%
param editor_share: percent = 12.5%
param settle_after: duration = 30d

account pool     "pool:{agreement}"
account funding  "publisher:funding" external
account author   "authors:{agreement}:royalties"
account editor   "editors:{agreement}:royalties"
account house    "house:revenue"

state open initial
state funded
state paid final
state voided final

clause "A" transition fund: open -> funded {
  by publisher
  stamp funded_at
  transfer payout from funding to pool
}

clause "B" transition distribute: funded -> paid {
  by scheduler, auditor
  when now >= funded_at + settle_after
  transfer payout from pool {
    author_share to author
    editor_share to editor
    remaining to house
  }
}

clause "C" transition void: open -> voided {
  by publisher, auditor
}

clause "D.1" invariant pool_never_negative: balance(pool) >= 0
clause "D.2" invariant pool_empty_when_paid: reached(paid) implies balance(pool) == 0
# 33.3333% is a little less than a third: the author is owed the rounded-down share, not a third.
clause "D.3" invariant author_gets_their_share: reached(paid) implies balance(author) >= payout * author_share
