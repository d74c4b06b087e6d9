# A payroll batch of 101 contractor lines, approved as a whole and paid in one
# transfer. Language 1.1: a state named `approved` and a param named `total`
# (words no longer reserved where a name cannot be mistaken for them), and sums
# of 101 terms written flat (a chain of more than 100 terms is one node, not
# nesting). The approver approves a total only if the lines add up to it, and
# the treasurer then pays that total; the invariant says the batch never pays
# more than it.
pact "payroll.batch" version "1.0.0"

currency EUR scale 2

role treasurer
role approver

param total: money between 0.00 and 250000.00
param line_001: money between 0.00 and 2500.00
param line_002: money between 0.00 and 2500.00
param line_003: money between 0.00 and 2500.00
param line_004: money between 0.00 and 2500.00
param line_005: money between 0.00 and 2500.00
param line_006: money between 0.00 and 2500.00
param line_007: money between 0.00 and 2500.00
param line_008: money between 0.00 and 2500.00
param line_009: money between 0.00 and 2500.00
param line_010: money between 0.00 and 2500.00
param line_011: money between 0.00 and 2500.00
param line_012: money between 0.00 and 2500.00
param line_013: money between 0.00 and 2500.00
param line_014: money between 0.00 and 2500.00
param line_015: money between 0.00 and 2500.00
param line_016: money between 0.00 and 2500.00
param line_017: money between 0.00 and 2500.00
param line_018: money between 0.00 and 2500.00
param line_019: money between 0.00 and 2500.00
param line_020: money between 0.00 and 2500.00
param line_021: money between 0.00 and 2500.00
param line_022: money between 0.00 and 2500.00
param line_023: money between 0.00 and 2500.00
param line_024: money between 0.00 and 2500.00
param line_025: money between 0.00 and 2500.00
param line_026: money between 0.00 and 2500.00
param line_027: money between 0.00 and 2500.00
param line_028: money between 0.00 and 2500.00
param line_029: money between 0.00 and 2500.00
param line_030: money between 0.00 and 2500.00
param line_031: money between 0.00 and 2500.00
param line_032: money between 0.00 and 2500.00
param line_033: money between 0.00 and 2500.00
param line_034: money between 0.00 and 2500.00
param line_035: money between 0.00 and 2500.00
param line_036: money between 0.00 and 2500.00
param line_037: money between 0.00 and 2500.00
param line_038: money between 0.00 and 2500.00
param line_039: money between 0.00 and 2500.00
param line_040: money between 0.00 and 2500.00
param line_041: money between 0.00 and 2500.00
param line_042: money between 0.00 and 2500.00
param line_043: money between 0.00 and 2500.00
param line_044: money between 0.00 and 2500.00
param line_045: money between 0.00 and 2500.00
param line_046: money between 0.00 and 2500.00
param line_047: money between 0.00 and 2500.00
param line_048: money between 0.00 and 2500.00
param line_049: money between 0.00 and 2500.00
param line_050: money between 0.00 and 2500.00
param line_051: money between 0.00 and 2500.00
param line_052: money between 0.00 and 2500.00
param line_053: money between 0.00 and 2500.00
param line_054: money between 0.00 and 2500.00
param line_055: money between 0.00 and 2500.00
param line_056: money between 0.00 and 2500.00
param line_057: money between 0.00 and 2500.00
param line_058: money between 0.00 and 2500.00
param line_059: money between 0.00 and 2500.00
param line_060: money between 0.00 and 2500.00
param line_061: money between 0.00 and 2500.00
param line_062: money between 0.00 and 2500.00
param line_063: money between 0.00 and 2500.00
param line_064: money between 0.00 and 2500.00
param line_065: money between 0.00 and 2500.00
param line_066: money between 0.00 and 2500.00
param line_067: money between 0.00 and 2500.00
param line_068: money between 0.00 and 2500.00
param line_069: money between 0.00 and 2500.00
param line_070: money between 0.00 and 2500.00
param line_071: money between 0.00 and 2500.00
param line_072: money between 0.00 and 2500.00
param line_073: money between 0.00 and 2500.00
param line_074: money between 0.00 and 2500.00
param line_075: money between 0.00 and 2500.00
param line_076: money between 0.00 and 2500.00
param line_077: money between 0.00 and 2500.00
param line_078: money between 0.00 and 2500.00
param line_079: money between 0.00 and 2500.00
param line_080: money between 0.00 and 2500.00
param line_081: money between 0.00 and 2500.00
param line_082: money between 0.00 and 2500.00
param line_083: money between 0.00 and 2500.00
param line_084: money between 0.00 and 2500.00
param line_085: money between 0.00 and 2500.00
param line_086: money between 0.00 and 2500.00
param line_087: money between 0.00 and 2500.00
param line_088: money between 0.00 and 2500.00
param line_089: money between 0.00 and 2500.00
param line_090: money between 0.00 and 2500.00
param line_091: money between 0.00 and 2500.00
param line_092: money between 0.00 and 2500.00
param line_093: money between 0.00 and 2500.00
param line_094: money between 0.00 and 2500.00
param line_095: money between 0.00 and 2500.00
param line_096: money between 0.00 and 2500.00
param line_097: money between 0.00 and 2500.00
param line_098: money between 0.00 and 2500.00
param line_099: money between 0.00 and 2500.00
param line_100: money between 0.00 and 2500.00
param line_101: money between 0.00 and 2500.00

account treasury "treasury:main" external
account payroll "payroll:{agreement}"

state draft initial
state approved
state paid final

clause "1" transition approve: draft -> approved {
  by approver
  when line_001 + line_002 + line_003 + line_004 + line_005 + line_006 + line_007 + line_008
    + line_009 + line_010 + line_011 + line_012 + line_013 + line_014 + line_015 + line_016
    + line_017 + line_018 + line_019 + line_020 + line_021 + line_022 + line_023 + line_024
    + line_025 + line_026 + line_027 + line_028 + line_029 + line_030 + line_031 + line_032
    + line_033 + line_034 + line_035 + line_036 + line_037 + line_038 + line_039 + line_040
    + line_041 + line_042 + line_043 + line_044 + line_045 + line_046 + line_047 + line_048
    + line_049 + line_050 + line_051 + line_052 + line_053 + line_054 + line_055 + line_056
    + line_057 + line_058 + line_059 + line_060 + line_061 + line_062 + line_063 + line_064
    + line_065 + line_066 + line_067 + line_068 + line_069 + line_070 + line_071 + line_072
    + line_073 + line_074 + line_075 + line_076 + line_077 + line_078 + line_079 + line_080
    + line_081 + line_082 + line_083 + line_084 + line_085 + line_086 + line_087 + line_088
    + line_089 + line_090 + line_091 + line_092 + line_093 + line_094 + line_095 + line_096
    + line_097 + line_098 + line_099 + line_100 + line_101 == total
}

clause "2" transition pay: approved -> paid {
  by treasurer
  transfer total from treasury to payroll
}

clause "3" invariant batch_within_total: balance(payroll) <= total
