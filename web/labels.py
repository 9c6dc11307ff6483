"""What the site and the slides say in each language (web/build.py): header links, notes, the stored-run
note, the note in place of 05's live TensorBoard frame."""

LABELS = {
    "en": {"twin": "한국어", "twin_lang": "ko", "colab": "Open in Colab", "download": "Download .ipynb",
           "download_title": "The notebook alone: it runs in a clone of the course (the front page's Start) or in Colab",
           "slides": "Slides", "slides_column": "slides", "page": "← the notebook's page", "note": "Note",
           "code": "the cell's code (click to open)",
           "front": ("Each page shows its notebook's stored run, made on the hardware its outputs name; run a "
                     "notebook in Colab or in a clone of the course (Start, below) to measure yours."),
           "stored": ("What you see below is this notebook's stored run, not a run on your machine. To run it on "
                      "yours, open it in Colab (the badge above) or in a clone of the course (the front page's "
                      "*Start*)."),
           "tensorboard": ("Run live, this cell shows TensorBoard here: a frame onto the server the cell starts (the "
                           "frame the text before this cell describes). This static page has no such server, so it "
                           "shows this note in its place; run the notebook to see the board. The notebook's earlier "
                           "cells read the same logs back with TensorBoard's own reader.")},
    "ko": {"twin": "English", "twin_lang": "en", "colab": "Colab에서 열기", "download": ".ipynb 내려받기",
           "download_title": "노트북 파일만 받습니다: 강좌를 clone한 폴더(첫 페이지의 '시작하기')나 Colab에서 실행됩니다",
           "slides": "슬라이드", "slides_column": "슬라이드", "page": "← 노트북 페이지", "note": "참고",
           "code": "셀의 코드 (눌러서 열기)",
           "front": ("각 페이지는 노트북에 저장된 실행을 보여 주며, 그 실행의 하드웨어는 출력에 적혀 있습니다. 여러분의 "
                     "수치는 노트북을 Colab이나 강좌를 clone한 폴더(아래 '시작하기')에서 실행해 측정하세요."),
           "stored": ("아래 출력은 이 노트북에 저장된 실행 결과이며, 여러분의 컴퓨터에서 실행한 것이 아닙니다. 여러분의 "
                      "컴퓨터에서 실행하려면 위의 배지로 Colab에서 열거나, 강좌를 clone한 폴더에서 여세요(첫 페이지의 "
                      "*시작하기*)."),
           "tensorboard": ("실행하면 이 셀은 여기에 TensorBoard를 보여 줍니다: 셀이 띄운 서버를 보여 주는 프레임(이 셀 "
                           "앞의 설명이 말하는 그 프레임)입니다. 정적인 이 페이지에는 그 서버가 없으므로 그 자리에 이 안내를 "
                           "보여 줍니다. 보드를 보려면 노트북을 실행하세요. 노트북의 앞선 셀들은 같은 로그를 "
                           "TensorBoard의 리더로 다시 읽습니다.")},
}
