"""What a final answer may say after its value: one rule of shape, in any language, for "is this a second candidate?"

    offers_another(head, value, clause)    # True: the clause puts another value forward as the answer

grpokit.rewards.math splits a final answer into its value ("12 hours", "$18", "18元") and what follows it on the
answer line or on the lines just after it (the clause). A final answer is ONE value; the clause may restate it,
convert it and explain it, but every number in the clause must be accounted for by one of:

- a restatement: the same number ("12, i.e. 12 apples");
- a conversion: the same quantity in another unit of the same dimension ("12 hours, i.e. 720 minutes",
  "18元，即1800分", "50%, i.e. 0.5", "36 km/h = 10 m/s", "45° (π/4 rad)"); units come from `_UNITS`, a table of
  facts (hours are 60 minutes), not words about answers, and two of them with "per" or "/" between are one unit;
- another dimension: a quantity of another kind than the value's when both units are known ("18元，因为她每天卖
  9个鸡蛋": yuan against a count; "7 hours (from 9 am to 4 pm)": a duration against clock times);
- a worked calculation: the operands of a true equation ("since 9 × 2 = 18"); its result, like the value of an
  expression, is a number stated and is accounted for as any other ("since 16 - 3 - 4 = 9 eggs" states 9);
- a derivation: the remaining numbers reach the value, two by one of + − × ÷, more as a sum or a product ("12,
  which is 3 more than 9", "18 dollars, since she sells 9 eggs at $2 each", "72 clips (48 in April and 24 in
  May)", "because 16 - 3 - 4 = 9 eggs sell at $2"); quantities of another dimension may join in
  ("因为她卖了6个鸡蛋，每个2元").

Any other number is a second candidate, whatever words surround it: "though 13 is possible", "that is 13",
"aunque 13 también es posible", "obwohl 13 auch möglich ist", "不过13也说得通", "13 + 0 is also possible" (an
expression that is not a true equation stands for its value, 13), "(13 for 2 people)" (13 and 2 reach 11, 15, 26,
6.5: not 12). No list of concession words is consulted, so no language is missing from it.

What shape cannot decide, and how it is read (the conservative way: a reward that pays a hedge teaches hedging):
- a premise named by a bare number or with a unit the table does not know is indistinguishable from a candidate
  ("7, since she also eats 3" has the shape of "7, since 3 is also possible"; "18 dollars, since she sells 9 eggs"
  that of "18 dollars, since 9 is possible"): both are refused;
- a comma (or 、) and then a number is a list, as "38, 39" is: "12, 4 more than 8" and the Japanese order
  "12、9より3多い" read as two answers; with a word first ("12, i.e. 4 more than 8", "12、つまり9より3多い") they
  are explanations;
- a candidate in words ("though thirteen is possible") has no number to count;
- a candidate whose numbers happen to reach the value ("12 (13 for 1 person)": 13 − 1 = 12) is read as a
  derivation, and one with a unit of another dimension than the value's ("12 hours, though 13 km") as another
  quantity.
"""
from __future__ import annotations

import ast
import itertools
import re
from fractions import Fraction
from typing import Callable

NUMBER_TOKEN = re.compile(r"(?:\d+(?:\.\d+)?|\.\d+)(?:\s*/\s*\d+(?:\.\d+)?)?")  # 72, 2.5, .5, 1/2

# ---------------------------------------------------------------- units: (dimension, size in the dimension's base)
# Facts about units, in the languages the table of final answers covers. A unit with several readings (分: a
# minute or a cent) lists each. None as the size: comparable only to the same number (counts of things). Words
# that are also common words after a number in a sentence ("in", "an", "mi") are left out: a unit of another
# dimension accounts for its number, so a word wrongly read as one would let a candidate through.
_T, _L, _M, _V = "time", "length", "mass", "volume"
_UNIT_GROUPS: list[tuple[str, Fraction | None, str]] = [
    (_T, Fraction(1), "s sec secs second seconds segundo segundos sekunde sekunden seconde secondes секунда секунды "
                      "секунд 秒 秒間 秒钟"),
    (_T, Fraction(60), "min mins minute minutes minuto minutos minuten минута минуты минут 分钟 分間 分"),
    (_T, Fraction(3600), "h hr hrs hour hours hora horas stunde stunden heure heures час часа часов 小时 钟头 時間"),
    (_T, Fraction(86400), "day days día días tag tage tagen jour jours день дня дней 天 日間"),
    (_T, Fraction(604800), "week weeks semana semanas woche wochen semaine semaines неделя недели недель 周 星期 週間"),
    (_T, None, "month months mes meses monat monate mois месяц месяца месяцев 个月 ヶ月 year years año años jahr jahre "
               "ans année années год года лет 年"),
    (_L, Fraction(1, 1000), "mm millimeter millimeters millimetre millimetres milímetro milímetros millimètre "
                            "millimètres мм 毫米"),
    (_L, Fraction(1, 100), "cm centimeter centimeters centimetre centimetres centímetro centímetros zentimeter "
                           "centimètre centimètres см сантиметр сантиметра сантиметров 厘米 センチ"),
    (_L, Fraction(1), "m meter meters metre metres metro metros mètre mètres м метр метра метров 米 メートル"),
    (_L, Fraction(1000), "km kilometer kilometers kilometre kilometres kilómetro kilómetros kilomètre kilomètres "
                         "км километр километра километров 千米 公里 キロ"),
    (_L, Fraction(254, 10000), "inch inches"),
    (_L, Fraction(3048, 10000), "ft foot feet"),
    (_L, Fraction(9144, 10000), "yard yards yd"),
    (_L, Fraction(1609344, 1000), "mile miles"),
    (_M, Fraction(1, 1000), "mg milligram milligrams 毫克"),
    (_M, Fraction(1), "g gram grams gramo gramos gramm gramme grammes г грамм грамма граммов 克 グラム"),
    (_M, Fraction(1000), "kg kilogram kilograms kilo kilos kilogramo kilogramos kilogramm kilogramme kilogrammes "
                         "кг килограмм килограмма килограммов 千克 公斤"),
    (_M, Fraction(500), "斤"),
    (_M, Fraction(45359237, 100000), "lb lbs pound pounds"),
    (_M, Fraction(28349523125, 1000000000), "oz ounce ounces"),
    (_V, Fraction(1, 1000), "ml milliliter milliliters millilitre millilitres mililitro mililitros milliliter мл 毫升"),
    (_V, Fraction(1), "l liter liters litre litres litro litros литр литра литров л 升 リットル"),
    ("usd", Fraction(1), "$ dollar dollars dólar dólares dollar доллар доллара долларов 美元 ドル"),
    ("usd", Fraction(1, 100), "cent cents ¢ centavo centavos"),
    ("cny", Fraction(1), "元 块钱 yuan rmb ￥"),
    ("cny", Fraction(1, 10), "角"),
    ("cny", Fraction(1, 100), "分"),
    ("eur", Fraction(1), "€ euro euros евро"),
    ("gbp", Fraction(1), "£"),
    ("jpy", Fraction(1), "円 yen"),
    ("rub", Fraction(1), "₽ рубль рубля рублей"),
    ("clock", None, "am a.m. pm p.m. 点 時"),
    ("date", None, "月 号"),  # 4月: April, a date (3个月, three months, is a duration: the longest unit wins)
    ("percent", Fraction(1, 100), "% percent prozent pourcent процент процента процентов"),
    ("angle", Fraction(1), "° deg degree degrees grados"),
    ("angle", Fraction(180), "πrad"),  # π radians: how `_PI_RADIANS` writes "π/4 rad" (1/4 πrad), a half turn
    ("count", None, "个 個 只 本 张 条 件 位 名 人 颗 支 辆 棵 头 匹 枚 台 冊 杯 person people persons personas "
                    "personen personnes человек"),
]
# One word each: a unit is read as the single word after a number ("per cent" would make "per" a unit).
_UNITS: dict[str, list[tuple[str, Fraction | None]]] = {}
for _dim, _size, _names in _UNIT_GROUPS:
    for _name in _names.split():
        if (_dim, _size) not in _UNITS.setdefault(_name, []):
            _UNITS[_name].append((_dim, _size))
_CJK_UNITS = sorted((u for u in _UNITS if re.match(r"[\u3040-\u30ff\u4e00-\u9fff]", u)), key=len, reverse=True)
_CJK_UNIT = re.compile("|".join(map(re.escape, _CJK_UNITS)))
_CURRENCY_BEFORE = re.compile(r"([$€£¥￥₽])\s*$")
_WORD_AFTER = re.compile(r"\s*([^\W\d_]+(?:\.[^\W\d_]+\.?)?|[%¢$€£₽°])", re.UNICODE)
# A compound unit: "km per h" (grpokit.rewards.math_values writes "km/h" so), "metres per second".
_PER = re.compile(r"\s*(?:per|/)\s*([^\W\d_]+)", re.IGNORECASE)
Unit = tuple[tuple[str, Fraction | None], ...]


def _unit_word(w: str) -> Unit:
    w = w.lower()
    return tuple(_UNITS.get(w) or _UNITS.get(w.rstrip(".")) or ())


def unit_at(text: str, start: int, end: int) -> Unit:
    """The readings of the unit of the number at text[start:end]: a currency sign before it, a unit word or sign
    after it, or two of them with "per" between ("36 km per h": length/time, 1000/3600 of the base); () when there
    is none the table knows."""
    before = _CURRENCY_BEFORE.search(text[max(0, start - 3):start])
    if before:
        return tuple(_UNITS[before.group(1)])
    rest = text[end:end + 40]
    cjk = _CJK_UNIT.match(rest.lstrip())
    if cjk:
        return tuple(_UNITS[cjk.group(0)])
    if _TEMPERATURE_AFTER.match(rest):  # "25 °C": a temperature, read apart (temperature_at), not an angle
        return ()
    word = _WORD_AFTER.match(rest)
    if not word:
        return ()
    unit = _unit_word(word.group(1))
    per = _PER.match(rest, word.end())
    below = _unit_word(per.group(1)) if unit and per else ()
    if below:
        return tuple((f"{d1}/{d2}", s1 / s2 if s1 is not None and s2 is not None else None)
                     for (d1, s1), (d2, s2) in itertools.product(unit, below))
    return unit


# Temperatures convert with an offset as well as a factor, so they are read apart: (scale, offset) to kelvin,
# K = (x + offset) x scale. "25 °C (77 °F)" restates 25 °C; "25 °C, though 26 °F" offers another.
_TEMPERATURES = {"c": (Fraction(1), Fraction(27315, 100)), "celsius": (Fraction(1), Fraction(27315, 100)),
                 "f": (Fraction(5, 9), Fraction(45967, 100)), "fahrenheit": (Fraction(5, 9), Fraction(45967, 100)),
                 "kelvin": (Fraction(1), Fraction(0))}
_TEMPERATURE_AFTER = re.compile(r"\s*(?:°\s*([cfCF])(?![^\W\d_])|(?:degrees?\s+)?(celsius|fahrenheit|kelvin)\b)",
                                re.IGNORECASE)


def temperature_at(text: str, end: int) -> Callable[[Fraction], Fraction] | None:
    """The number ending at text[:end] is a temperature: a function of it to kelvin's scale, else None."""
    m = _TEMPERATURE_AFTER.match(text[end:end + 24])
    if not m:
        return None
    scale, offset = _TEMPERATURES[(m.group(1) or m.group(2)).lower()]
    return lambda n: (n + offset) * scale


# ---------------------------------------------------------------- calculations written out in the clause
_TERM = r"\(*\s*(?:\d+(?:\.\d+)?|\.\d+)\s*\)*"
_CALC = re.compile(rf"{_TERM}(?:\s*(?:[-+*/×÷·]|\^)\s*{_TERM})*(?:\s*=\s*-?\s*{_TERM}(?:\s*(?:[-+*/×÷·]|\^)\s*{_TERM})*)*")
_OPERATOR = re.compile(r"[-+*/×÷·^=]")


def _evaluate(expr: str) -> Fraction | None:
    """The exact value of `expr` (digits, + - * / × ÷ ·, small powers, brackets); None if it is not one."""
    src = expr.replace("×", "*").replace("·", "*").replace("÷", "/").replace("^", "**")
    try:
        tree = ast.parse(src.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    return _node(tree)


def _node(n: ast.AST) -> Fraction | None:
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
        return Fraction(str(n.value))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
        v = _node(n.operand)
        return None if v is None else (-v if isinstance(n.op, ast.USub) else v)
    if not isinstance(n, ast.BinOp):
        return None
    a, b = _node(n.left), _node(n.right)
    if a is None or b is None:
        return None
    if isinstance(n.op, ast.Add):
        return a + b
    if isinstance(n.op, ast.Sub):
        return a - b
    if isinstance(n.op, ast.Mult):
        return a * b
    if isinstance(n.op, ast.Div):
        return None if b == 0 else a / b
    if isinstance(n.op, ast.Pow) and b.denominator == 1 and abs(b) <= 12 and abs(a) < 10**6:
        return None if a == 0 and b < 0 else a ** int(b)
    return None


def _balanced(side: str) -> str:
    """A side of an equation without the brackets of the sentence around it ("(since 16 + 2 = 18)")."""
    side = side.strip()
    while side.endswith(")") and side.count(")") > side.count("("):
        side = side[:-1].rstrip()
    while side.startswith("(") and side.count("(") > side.count(")"):
        side = side[1:].lstrip()
    return side


# ---------------------------------------------------------------- derivations: numbers that reach the value
# Two numbers by one operation ("3 more than 9", "9 eggs at $2"), or more as a sum of parts or a product ("5 in
# April, 3 in May and 4 in June"). Free bracketing of + − × ÷ over three or four numbers would reach almost any
# value by accident (20 × 9 ÷ 10 = 18), and every accident pays a hedge.
_MAX_OPERANDS = 6
_MAX_OPTIONAL = 4  # subsets of the optional numbers are tried: bounded, whatever a 200-character clause holds


def _reaches(nums: tuple[Fraction, ...], value: Fraction) -> bool:
    if len(nums) == 2:
        a, b = nums
        return value in (a + b, a - b, b - a, a * b) or (b != 0 and a / b == value) or (a != 0 and b / a == value)
    product = Fraction(1)
    for n in nums:
        product *= n
    return sum(nums) == value or product == value


def _derives(value: Fraction, required: list[Fraction], optional: list[Fraction]) -> bool:
    """All of `required`, with any of `optional`, reach `value`."""
    for k in range(len(optional) + 1):
        if len(required) + k > _MAX_OPERANDS:
            break
        for extra in itertools.combinations(optional, k):
            nums = tuple(required) + extra
            if len(nums) >= 2 and _reaches(nums, value):
                return True
    return False


# ---------------------------------------------------------------- the rule
def _same_quantity(n: Fraction, unit: Unit, value: Fraction, value_unit: Unit) -> bool | None:
    """True: n restates or converts the value; False: n is a quantity of another kind; None: neither shown."""
    if unit and value_unit:
        dims = {d for d, _ in unit}
        if not dims & {d for d, _ in value_unit}:
            return False  # another dimension: another quantity, not a candidate for this one
        for (d1, s1), (d2, s2) in itertools.product(unit, value_unit):
            if d1 == d2 and (n * s1 == value * s2 if s1 is not None and s2 is not None else n == value):
                return True
        return None
    percent = [s for d, s in unit + value_unit if d == "percent"]
    if percent and (unit or value_unit):  # 50% against a bare 0.5
        return True if (n * percent[0] == value if unit else n == value * percent[0]) else None
    return True if n == value else None


# An angle in radians written with π ("π/4 rad", "3π/4 radians", "2π rad"): its number of half turns, in the unit
# `πrad` of the table ("1/4 πrad"), so that "45° (π/4 rad)" converts as "12 hours (720 minutes)" does.
_PI_RADIANS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)?\s*(?:π|\\pi\b|\bpi\b)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*"
                         r"(?=rad(?:ians?)?\b)(?:rad(?:ians?)?)", re.IGNORECASE)


def _half_turns(m: re.Match) -> str:
    value = Fraction(m.group(1) or 1) / Fraction(m.group(2) or 1)
    return f"{value.numerator}/{value.denominator} πrad" if value.denominator != 1 else f"{value.numerator} πrad"


def offers_another(head: str, value: Fraction | None, clause: str) -> bool:
    """True when `clause` (what follows the value `head` of a final answer, fractions and thousands already
    normalised) holds a number that is not this value restated, converted or derived (module docstring)."""
    if not NUMBER_TOKEN.search(clause):
        return False
    clause = _PI_RADIANS.sub(_half_turns, clause) if "rad" in clause.lower() else clause
    if value is None:
        return True  # no single value to account for: any number in the clause competes with the head
    m = NUMBER_TOKEN.search(head)
    value_unit = unit_at(head, m.start(), m.end()) if m else ()
    value_temperature = temperature_at(head, m.end()) if m else None
    required: list[Fraction] = []
    optional: list[Fraction] = []
    calc_view = re.sub(r"[$€£¥￥₽]", " ", clause)  # "9 × $2 = $18" is a calculation
    calc_view = re.sub(r"\^\s*\{\s*(-?\d+)\s*\}", lambda p: "^" + p.group(1).ljust(len(p.group(0)) - 1), calc_view)
    for c in _CALC.finditer(calc_view):
        text = c.group(0)
        start, end = c.start(), c.end()
        if not NUMBER_TOKEN.search(text):
            continue
        negative = bool(re.search(r"(?:^|[^\w)])-\s*$", clause[:start]))  # "though -9", "-3 + 16"
        if _OPERATOR.search(text.strip()):
            # A true equation's operands derive its result; an expression or a false equation stands for its last
            # side ("13 + 0" is 13). Either way that result is a quantity stated, accounted for like any number.
            sides = text.split("=")
            if negative:
                sides[0] = "-" + sides[0]
            n = _evaluate(_balanced(sides[-1])) if "=" in text else _evaluate(_balanced(sides[0]))
            if n is None:
                return True  # not arithmetic that can be checked: it stands unexplained
            last = text.rsplit("=", 1)[-1]
            start = end - len(last.lstrip())
        else:
            n = Fraction(NUMBER_TOKEN.search(text).group(0).replace(" ", "")) * (-1 if negative else 1)
        unit = unit_at(clause, start, end)
        if any(d == "clock" for d, _ in unit) and re.match(r"\s*p\.?m", clause[end:end + 6], re.IGNORECASE):
            n = n % 12 + 12  # 4 pm is hour 16 of the day: "from 9 am to 4 pm" is 7 hours
        temperature = temperature_at(clause, end)
        if temperature is not None and value_temperature is not None:  # "25 °C (77 °F)": converted, or not
            same = True if temperature(n) == value_temperature(value) else None
        else:
            same = _same_quantity(n, unit, value, value_unit)
        if same is None:
            required.append(n)
        elif same is False:
            optional.append(n)  # "因为她卖了6个鸡蛋，每个2元": 6 eggs at 2 yuan reach 12 yuan
    if not required:
        return False
    return not _derives(value, required, optional[:_MAX_OPTIONAL])
