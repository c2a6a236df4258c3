"""A noisy Tatoeba, built reproducibly (--seed) for benchmarking corpus cleaning (scripts/bench_clean.py).

The clean Tatoeba zh-en training pairs (N of them), plus damage in fractions of N, plus the test set itself:

    duplicate       20%  exact copies of random training pairs
    misaligned      10%  random training pairs whose targets are shuffled among them (each from another pair)
    copy             5%  the source copied as the target: half the Chinese source on both sides, half the English
    wrong-language   5%  half: the target replaced by another pair's Chinese; half: the sides swapped (en → zh)
    glued            5%  two or three consecutive training pairs joined into one (Chinese without a space,
                         English with one): realistic noise, not wrong translations
    boilerplate      2%  web boilerplate from ~30 templates (copyright lines, navigation, cookie notices, URLs),
                         numbers and years varied, many lines repeated
    test                 every Tatoeba test pair (what the contamination guard must keep out)

All lines are shuffled with the seed. Writes DIR/train.zh, DIR/train.en and DIR/manifest.tsv (a header, then one
row per pair: its line number from 1, its kind as above or "clean", and a detail saying where it came from).

    python scripts/make_noisy_corpus.py                       # → data/noisy-tatoeba
    python scripts/make_noisy_corpus.py --out /tmp/noisy --seed 2 --force
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TATOEBA = ROOT.parent / "shared" / "data" / "zh-en" / "tatoeba"
FRACTIONS = {"duplicate": 0.20, "misaligned": 0.10, "copy": 0.05, "wrong-language": 0.05, "glued": 0.05,
             "boilerplate": 0.02}
KINDS = ["clean", *FRACTIONS, "test"]

Pair = tuple[str, str, str, str]  # (zh, en, kind, detail)

COMPANIES = [("华信科技有限公司", "Huaxin Technology Co., Ltd."), ("XX公司", "XX Inc."),
             ("蓝海网络", "Blue Ocean Networks"), ("星辰传媒集团", "Star Media Group")]
DOMAINS = ["www.example.com", "www.huaxin-tech.cn", "news.blueocean.com.cn", "www.starmedia.com"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
# (Chinese, English) with {fields} filled by fill(): about 30 kinds of web boilerplate.
TEMPLATES = [
    ("版权所有 © {year} {co_zh} 保留所有权利", "Copyright © {year} {co_en} All rights reserved."),
    ("© {year}-{year2} {co_zh} 版权所有", "© {year}-{year2} {co_en}. All Rights Reserved."),
    ("Copyright © {year} {co_zh} 版权所有 {icp}", "Copyright © {year} {co_en}"),
    ("点击这里订阅", "Click here to subscribe"),
    ("点击这里订阅我们的新闻邮件", "Click here to subscribe to our newsletter"),
    ("首页 | 关于我们 | 联系我们", "Home | About Us | Contact Us"),
    ("首页 > 新闻中心 > 公司新闻", "Home > News > Company News"),
    ("隐私政策 | 使用条款 | 网站地图", "Privacy Policy | Terms of Use | Sitemap"),
    ("登录 | 注册", "Log in | Sign up"),
    ("访问 {url}/zh 了解更多", "Learn more at {url2}/en"),
    ("访问 {url} 了解更多信息", "For more information, please visit our website."),
    ("详情请见：https://{url}/news/{n}.html", "See https://{url2}/en/news/{n} for details"),
    ("下载我们的应用：{url}/app", "Download our app"),
    ("本网站使用 Cookie 来改善您的浏览体验。", "This website uses cookies to improve your browsing experience."),
    ("我们使用 Cookie。继续浏览即表示您同意我们的 Cookie 政策。",
     "We use cookies. By continuing to browse, you agree to our cookie policy."),
    ("接受所有 Cookie", "Accept all cookies"),
    ("Cookie 设置 | 全部拒绝 | 全部接受", "Cookie settings | Reject all | Accept all"),
    ("上一页 1 2 3 … {n} 下一页", "Previous 1 2 3 … {n} Next"),
    ("第 {page} 页，共 {n} 页", "Page {page} of {n}"),
    ("发布时间：{year}-{mm:02d}-{dd:02d}", "Posted on {month} {dd}, {year}"),
    ("更新于 {year}年{mm}月{dd}日", "Updated {month} {dd}, {year}"),
    ("浏览次数：{n}", "Views: {n}"),
    ("分享到：微信 微博 QQ空间", "Share: Facebook Twitter LinkedIn"),
    ("返回顶部", "Back to top"),
    ("阅读全文 >>", "Read more >>"),
    ("京ICP备{icp}号", "Beijing ICP No. {icp}"),
    ("联系电话：010-{phone}", "Tel: +86 10 {phone}"),
    ("邮箱：info@{domain}", "Email: info@{domain}"),
    ("扫描二维码关注我们", "Scan the QR code to follow us"),
    ("免责声明：本站内容仅供参考。", "Disclaimer: the content of this site is for reference only."),
    ("加载中，请稍候……", "Loading, please wait..."),
    ("您的浏览器不支持 JavaScript，请启用后重试。", "Your browser does not support JavaScript. Please enable it."),
    ("相关文章", "Related articles"),
    ("本文由{co_zh}提供，转载请注明出处：{url}", "Provided by {co_en}. Please credit the source when reposting."),
]


def read_side(path: Path) -> list[str]:
    """A text file's lines, split at \\n only (as mt reads corpora)."""
    text = path.read_text(encoding="utf-8")
    return (text[:-1] if text.endswith("\n") else text).split("\n") if text else []


def read_pairs(data: Path, split: str) -> tuple[list[str], list[str]]:
    zh, en = read_side(data / f"{split}.zh"), read_side(data / f"{split}.en")
    if len(zh) != len(en):
        sys.exit(f"{data}/{split}.zh has {len(zh)} lines but {split}.en has {len(en)}")
    return zh, en


def fill(template: tuple[str, str], rng: random.Random) -> tuple[str, str]:
    """A template's two sides with its fields drawn from small sets, so that many lines repeat."""
    (co_zh, co_en), domain = rng.choice(COMPANIES), rng.choice(DOMAINS)
    year, mm, dd = rng.randint(2015, 2023), rng.randint(1, 12), rng.randint(1, 28)
    values = dict(co_zh=co_zh, co_en=co_en, year=year, year2=year + rng.randint(1, 3), mm=mm, dd=dd,
                  month=MONTHS[mm - 1], url=domain, url2=rng.choice(DOMAINS), domain=domain.removeprefix("www."),
                  n=rng.choice([3, 5, 10, 12, 25, 128, 1024, 2048]), page=rng.randint(1, 3),
                  icp=f"{rng.choice([5, 12, 18])}0{rng.randint(10, 99)}", phone=f"{rng.randint(6000, 6009)}-8888")
    return template[0].format(**values), template[1].format(**values)


def halves(n: int) -> tuple[int, int]:
    return n - n // 2, n // 2


def damage(zh: list[str], en: list[str], rng: random.Random) -> list[Pair]:
    """The added pairs, every kind of FRACTIONS, in kind order."""
    n_pairs = len(zh)
    count = {kind: round(fraction * n_pairs) for kind, fraction in FRACTIONS.items()}
    out: list[Pair] = []
    for i in rng.sample(range(n_pairs), count["duplicate"]):
        out.append((zh[i], en[i], "duplicate", f"train:{i + 1}"))
    out += misaligned(zh, en, count["misaligned"], rng)
    first, _ = halves(count["copy"])
    for k, i in enumerate(rng.sample(range(n_pairs), count["copy"])):
        side = zh[i] if k < first else en[i]
        out.append((side, side, "copy", f"{'zh' if k < first else 'en'} of train:{i + 1} on both sides"))
    first, _ = halves(count["wrong-language"])
    for k, i in enumerate(rng.sample(range(n_pairs), count["wrong-language"])):
        if k < first:
            j = rng.randrange(n_pairs)
            while zh[j] == zh[i]:
                j = rng.randrange(n_pairs)
            out.append((zh[i], zh[j], "wrong-language", f"zh of train:{i + 1}, target zh of train:{j + 1}"))
        else:
            out.append((en[i], zh[i], "wrong-language", f"train:{i + 1} swapped (en → zh)"))
    for _ in range(count["glued"]):
        k = rng.choice((2, 3))
        i = rng.randrange(n_pairs - k + 1)
        out.append(("".join(zh[i:i + k]), " ".join(en[i:i + k]), "glued", f"train:{i + 1}-{i + k}"))
    for _ in range(count["boilerplate"]):
        t = rng.randrange(len(TEMPLATES))
        out.append((*fill(TEMPLATES[t], rng), "boilerplate", f"template {t + 1}"))
    return out


def misaligned(zh: list[str], en: list[str], n: int, rng: random.Random) -> list[Pair]:
    """n training pairs with pairwise different sources and targets, each given the next one's target (in a
    random order): no pair keeps its own target, nor one equal to it."""
    order = list(range(len(zh)))
    rng.shuffle(order)
    chosen, seen_zh, seen_en = [], set(), set()
    for i in order:
        if zh[i] not in seen_zh and en[i] not in seen_en:
            chosen.append(i)
            seen_zh.add(zh[i])
            seen_en.add(en[i])
            if len(chosen) == n:
                break
    return [(zh[i], en[j], "misaligned", f"zh of train:{i + 1}, en of train:{j + 1}")
            for i, j in zip(chosen, chosen[1:] + chosen[:1])]


def build(data: Path, seed: int) -> list[Pair]:
    """Every pair of the noisy corpus, shuffled."""
    rng = random.Random(seed)
    zh, en = read_pairs(data, "train")
    test_zh, test_en = read_pairs(data, "test")
    pairs = [(z, e, "clean", f"train:{i + 1}") for i, (z, e) in enumerate(zip(zh, en))]
    pairs += damage(zh, en, rng)
    pairs += [(z, e, "test", f"test:{i + 1}") for i, (z, e) in enumerate(zip(test_zh, test_en))]
    rng.shuffle(pairs)
    return pairs


def write(out: Path, pairs: list[Pair]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for k, name in ((0, "train.zh"), (1, "train.en")):
        (out / name).write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")
    rows = [f"{i}\t{kind}\t{detail}\n" for i, (_, _, kind, detail) in enumerate(pairs, start=1)]
    (out / "manifest.tsv").write_text("line\tkind\tdetail\n" + "".join(rows), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "noisy-tatoeba", help="output directory")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=TATOEBA, help="folder with train.{zh,en} and test.{zh,en}")
    parser.add_argument("--force", action="store_true", help="overwrite the files of an existing --out")
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()) and not args.force:
        sys.exit(f"{args.out} exists and is not empty: pass --force to overwrite it, or choose another --out")
    pairs = build(args.data, args.seed)
    if any("\t" in z or "\t" in e or "\n" in z or "\n" in e for z, e, _, _ in pairs):
        sys.exit("a sentence holds a tab or a newline: cannot write aligned files")
    write(args.out, pairs)
    counts = Counter(kind for _, _, kind, _ in pairs)
    n_train = counts["clean"]
    print(f"noisy Tatoeba (seed {args.seed}) → {args.out}: {len(pairs):,} pairs")
    for kind in KINDS:
        share = f"{100 * counts[kind] / n_train:5.1f}% of N" if kind != "test" else "the test set"
        print(f"  {kind:<15} {counts[kind]:>7,}  ({share})")
    print(f"  (N = {n_train:,} clean training pairs from {args.data}/train)")


if __name__ == "__main__":
    main()
